"""Word lists and sentence grammars for the synthetic SKBs (``synth.py``).

Every list is grouped by *topic* (a Prime organ system, an Amazon shopping domain, a MAG research area):
a node gets one topic and draws most of its words from it, so texts of linked nodes share vocabulary the
way real ones do. Synonym groups (``kidney``/``renal``, ``waterproof``/``water resistant``) make a name
and a description say the same thing in different words, which keeps lexical retrieval honest.
"""

from __future__ import annotations

import random

# --------------------------------------------------------------------------------------------- shared
SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("kidney", "renal", "nephric"),
    ("heart", "cardiac", "myocardial"),
    ("liver", "hepatic"),
    ("lung", "pulmonary", "respiratory"),
    ("skin", "cutaneous", "dermal"),
    ("brain", "cerebral", "neural"),
    ("bone", "skeletal", "osseous"),
    ("eye", "ocular", "ophthalmic"),
    ("blood", "hematologic", "haematological"),
    ("stomach", "gastric"),
    ("bowel", "intestinal", "enteric"),
    ("muscle", "muscular", "myopathic"),
    ("ear", "auditory", "otic"),
    ("joint", "articular"),
    ("vessel", "vascular"),
    ("nerve", "neuronal"),
    ("gland", "glandular"),
    ("tooth", "dental"),
    ("breast", "mammary"),
    ("pancreas", "pancreatic"),
    ("enlarged", "hypertrophic", "swollen"),
    ("reduced", "decreased", "diminished", "low"),
    ("increased", "elevated", "raised", "high"),
    ("absent", "missing", "lacking"),
    ("inflammation", "inflammatory", "itis"),
    ("pain", "ache", "discomfort"),
    ("tumor", "neoplasm", "growth"),
    ("inherited", "hereditary", "familial", "genetic"),
    ("congenital", "present at birth", "inborn"),
    ("waterproof", "water resistant", "water repellent"),
    ("lightweight", "light", "featherweight"),
    ("durable", "sturdy", "rugged", "heavy duty"),
    ("portable", "compact", "travel size"),
    ("cheap", "affordable", "budget", "inexpensive"),
    ("small", "mini", "little"),
    ("large", "big", "oversized"),
    ("stainless steel", "steel"),
    ("bag", "pouch", "case"),
    ("bottle", "flask"),
    ("method", "approach", "technique"),
    ("model", "framework"),
    ("analysis", "study", "investigation"),
    ("efficient", "fast", "scalable"),
    ("novel", "new"),
    ("robust", "reliable", "stable"),
)

DIGITS = "0123456789"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
SYLLABLES = (
    "al", "an", "ar", "ba", "be", "bo", "ca", "ce", "cor", "da", "de", "do", "el", "en", "fa", "fi", "ga", "gen",
    "ha", "in", "ka", "ko", "la", "le", "lo", "ma", "me", "mi", "mo", "na", "ne", "no", "or", "pa", "pe", "pro",
    "ra", "re", "ri", "ro", "sa", "se", "so", "ta", "te", "ti", "to", "tra", "va", "ve", "vi", "xa", "ze", "zo",
)

# ---------------------------------------------------------------------------------------------- prime
# topic -> (organs/tissues, symptoms/features, molecules)
PRIME_TOPICS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "cardiovascular": (("heart", "cardiac", "aorta", "artery", "valve", "ventricle", "myocardial"),
                       ("arrhythmia", "chest pain", "palpitations", "hypertension", "syncope", "edema"),
                       ("troponin", "angiotensin", "natriuretic peptide", "nitric oxide")),
    "renal": (("kidney", "renal", "nephron", "glomerulus", "ureter", "bladder"),
              ("proteinuria", "hematuria", "polyuria", "renal cysts", "nephrocalcinosis"),
              ("sodium", "potassium", "urea", "creatinine")),
    "hepatic": (("liver", "hepatic", "bile duct", "gallbladder", "hepatocyte"),
                ("jaundice", "hepatomegaly", "cholestasis", "ascites", "fibrosis"),
                ("bilirubin", "bile acid", "albumin", "transaminase")),
    "respiratory": (("lung", "pulmonary", "bronchus", "alveolus", "trachea", "airway"),
                    ("dyspnea", "cough", "wheezing", "bronchiectasis", "hypoxemia"),
                    ("surfactant", "mucin", "oxygen", "carbon dioxide")),
    "neurologic": (("brain", "cerebral", "cerebellum", "spinal cord", "cortex", "neuron", "nerve"),
                   ("seizures", "ataxia", "spasticity", "intellectual disability", "tremor", "neuropathy"),
                   ("dopamine", "glutamate", "acetylcholine", "serotonin", "myelin")),
    "skeletal": (("bone", "skeletal", "vertebra", "femur", "cartilage", "joint"),
                 ("scoliosis", "short stature", "osteopenia", "fractures", "joint laxity"),
                 ("collagen", "calcium", "phosphate", "vitamin D")),
    "dermatologic": (("skin", "cutaneous", "epidermis", "hair follicle", "nail", "dermis"),
                     ("eczema", "hyperkeratosis", "alopecia", "blistering", "pruritus", "erythema"),
                     ("keratin", "melanin", "filaggrin", "ceramide")),
    "ocular": (("eye", "ocular", "retina", "cornea", "lens", "optic nerve"),
               ("cataract", "myopia", "nystagmus", "retinal degeneration", "glaucoma"),
               ("rhodopsin", "retinol", "crystallin", "opsin")),
    "hematologic": (("blood", "bone marrow", "erythrocyte", "platelet", "spleen", "lymph node"),
                    ("anemia", "thrombocytopenia", "neutropenia", "bleeding", "splenomegaly"),
                    ("hemoglobin", "ferritin", "fibrinogen", "heparin")),
    "immune": (("thymus", "lymphocyte", "macrophage", "T cell", "B cell", "tonsil"),
               ("recurrent infections", "autoimmunity", "fever", "lymphadenopathy", "rash"),
               ("interleukin", "interferon", "immunoglobulin", "cytokine", "histamine")),
    "endocrine": (("thyroid", "pancreas", "pancreatic", "adrenal gland", "pituitary", "islet"),
                  ("hypoglycemia", "goiter", "obesity", "insulin resistance", "hypothyroidism"),
                  ("insulin", "cortisol", "thyroxine", "glucagon", "estrogen")),
    "gastrointestinal": (("stomach", "gastric", "colon", "intestinal", "esophagus", "bowel"),
                         ("diarrhea", "vomiting", "abdominal pain", "malabsorption", "constipation"),
                         ("gastrin", "pepsin", "lactase", "mucus")),
    "muscular": (("muscle", "muscular", "skeletal muscle", "myofiber", "tendon", "diaphragm"),
                 ("muscle weakness", "myalgia", "hypotonia", "cramps", "muscle atrophy"),
                 ("dystrophin", "myosin", "actin", "creatine kinase")),
    "reproductive": (("ovary", "testis", "uterus", "breast", "mammary", "prostate"),
                     ("infertility", "amenorrhea", "hypogonadism", "gynecomastia"),
                     ("testosterone", "progesterone", "prolactin", "estradiol")),
    "metabolic": (("mitochondrion", "peroxisome", "lysosome", "adipose tissue"),
                  ("lactic acidosis", "hyperammonemia", "hypoglycemia", "failure to thrive"),
                  ("glucose", "glycogen", "cholesterol", "fatty acid", "lactate", "amino acid")),
    "oncologic": (("tumor", "carcinoma", "stroma", "epithelium", "neoplasm"),
                  ("weight loss", "metastasis", "night sweats", "tumor growth"),
                  ("p53", "kinase", "growth factor", "telomerase")),
}
PRIME_MODIFIERS = ("congenital", "inherited", "familial", "juvenile", "adult-onset", "early-onset", "progressive",
                   "autosomal dominant", "autosomal recessive", "X-linked", "acquired", "idiopathic", "chronic",
                   "acute", "severe", "mild", "primary", "secondary", "isolated", "syndromic")
PRIME_CONDITIONS = ("disease", "disorder", "syndrome", "dystrophy", "deficiency", "cancer", "carcinoma",
                    "insufficiency", "dysplasia", "malformation", "degeneration", "inflammation", "atrophy")
PRIME_EPONYMS = ("Alder", "Bram", "Castell", "Dorn", "Everet", "Fahl", "Garrod", "Holt", "Ivers", "Janse", "Kell",
                 "Lind", "Moravec", "Nolan", "Ostrow", "Pfeiff", "Quist", "Rendu", "Sollen", "Tauber", "Ullr", "Vogt",
                 "Wern", "Yates", "Zell")
PRIME_ABNORMAL = ("Abnormality of the", "Abnormal", "Increased", "Decreased", "Absent", "Enlarged", "Hypoplasia of the",
                  "Aplasia of the", "Dysplasia of the", "Atrophy of the", "Small", "Elevated circulating",
                  "Reduced circulating")
PRIME_FEATURES = ("morphology", "size", "function", "density", "thickness", "shape", "volume", "level",
                  "concentration", "position", "number")
PRIME_GENE_PREFIXES = ("SLC", "KRT", "ZNF", "CYP", "ABC", "TP", "BRC", "COL", "MAP", "HOX", "IL", "TNF", "CDK",
                       "FGF", "WNT", "SMAD", "GATA", "SOX", "PAX", "KCN", "SCN", "CACN", "ADAM", "MMP", "ATP", "NDUF",
                       "RPL", "RPS", "HLA", "TRIM", "USP", "DNAJ", "HSP", "PRKC", "RAB", "ARHG", "MYO", "LAM", "ITG",
                       "CLDN", "GPR", "OR", "TMEM", "FAM", "CCDC", "LRR", "NOTCH", "ERBB", "PDGF", "VEGF", "TGF",
                       "STAT", "JAK", "NFK", "FOX", "TBX", "NKX", "GRI", "CHRN", "PPP", "UBE", "POL", "MT", "ALDH")
PRIME_PROTEIN_CLASSES = ("transmembrane transporter", "serine/threonine kinase", "zinc finger transcription factor",
                         "structural protein", "ion channel subunit", "G protein-coupled receptor", "ubiquitin ligase",
                         "metalloprotease", "cytochrome P450 enzyme", "heat shock chaperone", "cell adhesion molecule",
                         "growth factor", "nuclear receptor", "ribosomal protein", "membrane glycoprotein")
PRIME_GENE_ACTIONS = ("regulates the transport of", "catalyzes the breakdown of", "binds", "modulates signaling by",
                      "controls the synthesis of", "is required for the uptake of", "stabilizes",
                      "mediates the response to")
PRIME_DOMAINS = ("kinase", "zinc finger", "immunoglobulin-like", "EGF-like", "leucine-rich repeat", "SH3", "PDZ",
                 "ankyrin repeat", "WD40 repeat", "helix-loop-helix", "homeobox", "ABC transporter", "lectin")
PRIME_DRUG_SUFFIXES = ("tinib", "mab", "pril", "olol", "sartan", "statin", "azole", "cillin", "mycin", "dronate",
                       "parin", "vir", "platin", "caine", "setron", "glitazone", "lukast", "dipine", "triptan", "zumab")
PRIME_DRUG_CLASSES = ("kinase inhibitor", "monoclonal antibody", "ACE inhibitor", "beta blocker",
                      "angiotensin receptor blocker", "HMG-CoA reductase inhibitor", "antifungal agent",
                      "beta-lactam antibiotic", "bisphosphonate", "anticoagulant", "antiviral agent",
                      "platinum-based chemotherapeutic", "local anesthetic", "serotonin antagonist",
                      "calcium channel blocker", "corticosteroid", "immunosuppressant", "diuretic")
PRIME_DRUG_ACTIONS = ("inhibits", "blocks", "selectively binds", "antagonizes", "activates", "reversibly inhibits")
PRIME_DRUG_FORMS = ("oral tablet", "intravenous infusion", "topical cream", "subcutaneous injection",
                    "ophthalmic solution", "inhaled powder", "extended-release capsule")
PRIME_PROCESSES = ("signaling", "transport", "biosynthesis", "catabolic process", "metabolic process", "secretion",
                   "homeostasis", "differentiation", "proliferation", "apoptotic process", "development",
                   "repair", "assembly", "localization", "response")
PRIME_REGULATION = ("", "", "regulation of", "positive regulation of", "negative regulation of",
                    "cellular response to")
PRIME_MF_ACTIVITIES = ("binding", "kinase activity", "transporter activity", "receptor activity",
                       "hydrolase activity", "channel activity", "oxidoreductase activity", "ligase activity")
PRIME_COMPONENTS = ("complex", "membrane", "granule", "vesicle", "lumen", "filament", "junction", "body",
                    "envelope", "matrix")
PRIME_PATHWAY_HEADS = ("Signaling by", "Metabolism of", "Regulation of", "Transport of", "Degradation of",
                       "Biosynthesis of", "Activation of", "Response to")
PRIME_EXPOSURES = ("arsenic", "lead", "benzene", "cadmium", "particulate matter", "ozone", "mercury", "asbestos",
                   "tobacco smoke", "pesticides", "bisphenol A", "radon", "ultraviolet radiation", "dioxin",
                   "phthalates", "nitrogen dioxide", "alcohol", "noise", "heat", "mold")
PRIME_ANATOMY_ADJ = ("anterior", "posterior", "superior", "inferior", "medial", "lateral", "proximal", "distal",
                     "left", "right", "upper", "lower", "inner", "outer")
PRIME_ANATOMY_PARTS = ("region", "wall", "epithelium", "tissue", "layer", "segment", "lobe", "surface", "cell",
                       "duct", "zone", "capsule")
PRIME_SOURCES = {
    "disease": ("MONDO", "MONDO_grouped"), "gene/protein": ("NCBI",), "drug": ("DrugBank",), "pathway": ("REACTOME",),
    "anatomy": ("UBERON",), "effect/phenotype": ("HPO",), "biological_process": ("GO",),
    "molecular_function": ("GO",), "cellular_component": ("GO",), "exposure": ("CTD",),
}

# --------------------------------------------------------------------------------------------- amazon
# domain -> (product nouns, uses)
AMAZON_DOMAINS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "Camping": (("tent", "sleeping bag", "camp stove", "lantern", "hammock", "cooler"),
                ("backpacking", "car camping", "festivals", "emergency kits")),
    "Cycling": (("bike light", "saddle bag", "derailleur hanger", "helmet", "bike lock", "water bottle cage"),
                ("road cycling", "mountain biking", "commuting", "bike touring")),
    "Fishing": (("fishing reel", "tackle box", "fishing line", "lure set", "rod holder", "landing net"),
                ("fly fishing", "bass fishing", "ice fishing", "surf casting")),
    "Fitness": (("yoga mat", "resistance band", "dumbbell", "jump rope", "foam roller", "kettlebell"),
                ("home workouts", "yoga", "strength training", "physical therapy")),
    "Hiking": (("trekking pole", "daypack", "hydration bladder", "hiking sock", "gaiter", "headlamp"),
               ("day hikes", "trail running", "mountaineering", "thru-hiking")),
    "Kitchen": (("chef knife", "cutting board", "travel mug", "water bottle", "spatula", "mixing bowl"),
                ("meal prep", "baking", "coffee on the go", "grilling")),
    "Golf": (("golf glove", "golf ball", "tee set", "rangefinder", "golf towel", "putting mat"),
             ("practice", "tournament play", "driving range", "putting drills")),
    "Team Sports": (("soccer ball", "shin guard", "basketball", "hockey stick", "goalie glove", "training cone"),
                    ("youth leagues", "team practice", "pickup games", "coaching")),
    "Water Sports": (("swim goggle", "dry bag", "life jacket", "paddle", "snorkel set", "wetsuit"),
                     ("kayaking", "snorkeling", "paddleboarding", "open water swimming")),
    "Winter Sports": (("ski goggle", "snowboard wax", "hand warmer", "balaclava", "ski glove", "snow shovel"),
                      ("skiing", "snowboarding", "ice skating", "winter hiking")),
    "Hunting": (("game camera", "blind chair", "scent eliminator", "decoy", "gun case", "binocular harness"),
                ("deer season", "waterfowl hunting", "scouting", "archery")),
    "Fan Shop": (("team jersey", "fan flag", "license plate frame", "bobblehead", "team cap", "stadium blanket"),
                 ("game day", "tailgating", "gift giving", "collecting")),
    "Pets": (("dog leash", "cat toy", "pet bed", "collapsible bowl", "grooming brush", "pet carrier"),
             ("daily walks", "travel with pets", "grooming", "training")),
    "Electronics": (("phone mount", "power bank", "bluetooth speaker", "action camera", "charging cable",
                     "earbuds"), ("travel", "outdoor adventures", "daily commute", "workouts")),
    "Apparel": (("rain jacket", "base layer", "fleece vest", "compression sleeve", "sun hat", "running shorts"),
                ("layering", "running", "rainy days", "sun protection")),
    "Tools": (("multitool", "pocket knife", "tool kit", "tire pump", "zip tie set", "repair tape"),
              ("quick repairs", "everyday carry", "bike maintenance", "emergencies")),
}
AMAZON_CATEGORY_NOUNS = ("Accessories", "Equipment", "Gear", "Tools", "Bags", "Apparel", "Parts", "Storage",
                         "Safety", "Electronics", "Essentials", "Kits", "Footwear", "Replacement Parts", "Training",
                         "Clothing", "Lights", "Maintenance", "Nutrition", "Cases", "Supplies", "Components",
                         "Protective Gear", "Outerwear", "Covers", "Mounts", "Hydration", "Optics", "Furniture",
                         "Decor", "Games", "Gifts", "Cookware", "Bottles", "Packs", "Racks", "Straps", "Pads",
                         "Gloves", "Hats", "Socks", "Blankets", "Chairs", "Tables", "Cleaning", "Tents", "Lighting",
                         "Cooking", "Sleeping", "First Aid", "Navigation", "Knives", "Fitness Trackers", "Balls",
                         "Nets", "Targets", "Bags & Cases", "Grips", "Tape", "Wax", "Lubricants", "Pumps",
                         "Locks", "Helmets", "Goggles")
AMAZON_COLORS = ("Black", "White", "Red", "Blue", "Green", "Yellow", "Orange", "Purple", "Pink", "Gray", "Brown",
                 "Navy", "Teal", "Olive", "Maroon", "Beige", "Silver", "Gold", "Turquoise", "Charcoal", "Khaki",
                 "Coral", "Lavender", "Mint", "Burgundy", "Tan", "Ivory", "Camo", "Cyan", "Magenta", "Indigo",
                 "Bronze", "Copper", "Cream", "Lime", "Aqua", "Slate", "Sand", "Rust", "Plum", "Sky", "Forest",
                 "Steel", "Graphite", "Ruby")
AMAZON_COLOR_MODIFIERS = ("", "Matte", "Glossy", "Dark", "Light", "Neon", "Heather", "Metallic", "Pastel", "Deep",
                          "Bright", "Royal", "Rose", "Midnight", "Electric", "Dusty", "Frosted", "Vintage", "Classic",
                          "Solid", "Two-Tone", "Ocean", "Desert", "Arctic", "Jungle", "Stealth", "Sunset", "Storm",
                          "Smoke", "Clear", "Translucent", "Carbon", "Marbled", "Speckled", "Striped", "Tie-Dye",
                          "Ombre", "Faded", "Burnt", "Washed")
AMAZON_BRAND_SUFFIXES = ("", "", "", " Outdoors", " Co.", " Gear", " Labs", " Sports", " Works", " Supply",
                         " Goods", " Pro", " USA", " Designs")
AMAZON_ADJECTIVES = ("waterproof", "lightweight", "durable", "portable", "adjustable", "ergonomic", "foldable",
                     "reusable", "insulated", "breathable", "non-slip", "heavy duty", "compact", "rechargeable",
                     "quick-dry", "reflective", "padded", "anti-fog", "leakproof", "shockproof")
AMAZON_MATERIALS = ("stainless steel", "aluminum", "nylon", "silicone", "neoprene", "bamboo", "leather",
                    "polyester", "carbon fiber", "rubber", "cotton", "titanium", "ABS plastic", "canvas", "merino wool")
AMAZON_FEATURES = ("BPA free", "machine washable", "lifetime warranty", "easy to assemble", "fits most adults",
                   "includes carrying case", "dishwasher safe", "UV resistant", "tool free installation",
                   "one size fits all", "quick release buckle", "USB rechargeable battery", "glow in the dark",
                   "double wall vacuum insulation", "reinforced stitching", "anti-slip grip", "magnetic closure",
                   "adjustable strap", "odor resistant fabric", "tangle free design", "officially licensed",
                   "fits in a backpack pocket", "replaceable parts", "weather sealed zipper", "ultra bright LED")
AMAZON_OPINIONS = ("Works exactly as described.", "Would buy again.", "A bit pricey but worth it.",
                   "Arrived quickly and well packaged.", "My kids love it.", "Not as sturdy as I hoped.",
                   "Great value for the money.", "Perfect gift for my husband.", "Instructions were confusing.",
                   "Held up after months of use.", "Smaller than expected.", "Exceeded my expectations.")
AMAZON_REVIEW_SUMMARIES = ("Great product", "Love it", "Does the job", "Five stars", "Disappointed",
                           "Solid purchase", "Good but not great", "Highly recommend", "Okay", "Excellent quality")

# ------------------------------------------------------------------------------------------------ mag
# area -> (topic terms, method terms)
MAG_AREAS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "machine learning": (("neural networks", "representation learning", "reinforcement learning", "classification",
                          "generalization", "transfer learning"),
                         ("gradient descent", "attention mechanism", "kernel method", "variational inference")),
    "computer vision": (("image segmentation", "object detection", "optical flow", "image denoising",
                         "pose estimation"), ("convolutional network", "feature matching", "graph cut")),
    "natural language processing": (("machine translation", "question answering", "parsing", "sentiment analysis",
                                     "language modeling"), ("transformer", "word embeddings", "beam search")),
    "databases": (("query optimization", "transaction processing", "indexing", "data integration"),
                  ("B-tree", "cost model", "join algorithm", "sampling")),
    "networking": (("congestion control", "routing protocols", "wireless networks", "software-defined networking"),
                   ("queueing model", "packet scheduling", "network coding")),
    "condensed matter physics": (("superconductivity", "topological insulators", "quantum magnetism",
                                  "phase transitions"), ("density functional theory", "Monte Carlo simulation",
                                                         "renormalization group")),
    "high energy physics": (("holography", "string theory", "quantum dimensions", "black holes", "dark matter"),
                            ("lattice gauge theory", "perturbation theory", "Monte Carlo simulation")),
    "thermal engineering": (("heat exchangers", "condensers", "refrigeration cycles", "two-phase flow"),
                            ("computational fluid dynamics", "experimental measurement", "correlation analysis")),
    "molecular biology": (("gene expression", "protein folding", "DNA repair", "RNA splicing", "cell signaling"),
                          ("CRISPR screening", "mass spectrometry", "single-cell sequencing")),
    "ecology": (("species diversity", "climate change", "population dynamics", "invasive species"),
                ("field survey", "remote sensing", "structural equation model")),
    "economics": (("labor markets", "monetary policy", "auction design", "economic growth"),
                  ("panel regression", "instrumental variables", "general equilibrium model")),
    "materials science": (("thin films", "nanoparticles", "corrosion", "polymer composites", "batteries"),
                          ("X-ray diffraction", "electron microscopy", "molecular dynamics")),
    "epidemiology": (("vaccination", "disease transmission", "cohort outcomes", "risk factors"),
                     ("logistic regression", "survival analysis", "compartmental model")),
    "robotics": (("motion planning", "grasping", "localization", "legged locomotion"),
                 ("model predictive control", "particle filter", "imitation learning")),
}
MAG_TITLE_PATTERNS = ("{m} for {t}", "On the {t} problem", "{t}: a {m} perspective", "Towards {adj} {t}",
                      "{adj_a} {m} for {t}", "Revisiting {t} with {m}", "{adj} {t} via {m}",
                      "An empirical study of {t}", "{t} in the presence of {t2}", "Scaling {m} to {t}")
MAG_ADJECTIVES = ("efficient", "robust", "scalable", "novel", "unified", "adaptive", "accurate", "fast",
                  "distributed", "interpretable", "provable", "stable", "sparse", "hierarchical")
MAG_ABSTRACT_SENTENCES = ("We study {t} and propose {adj_a} {m}.", "Existing approaches to {t} suffer from {t2}.",
                          "Our analysis shows that {m} improves {t} substantially.",
                          "Experiments on {n} benchmarks confirm the effectiveness of the approach.",
                          "We further relate {t} to {t2} and discuss open problems.",
                          "The results suggest that {t2} plays a central role in {t}.",
                          "An approach based on {m} is developed and evaluated.",
                          "We report measurements for {t} under varied conditions.")
MAG_VENUES = ("Physical Review Letters", "NeurIPS", "ICML", "CVPR", "ACL", "SIGMOD", "VLDB", "INFOCOM",
              "Nature", "Science", "Journal of Applied Physics", "International Journal of Heat and Mass Transfer",
              "Ecology Letters", "American Economic Review", "Advanced Materials", "The Lancet", "ICRA",
              "Journal of High Energy Physics", "Cell", "PLOS ONE")
MAG_FIRST_NAMES = ("Wei", "Anna", "James", "Maria", "Yuki", "Carlos", "Fatima", "Ivan", "Priya", "Liam", "Sofia",
                   "Chen", "Olga", "Ahmed", "Elena", "David", "Mei", "Juan", "Sara", "Hiroshi", "Nadia", "Peter",
                   "Lucia", "Omar", "Jing", "Stojan", "Ingrid", "Kofi", "Aisha", "Mateo", "Hana", "Lars", "Rosa",
                   "Tomasz", "Zara", "Arjun", "Greta", "Felix", "Leila", "Sergei")
MAG_LAST_NAMES = ("Wang", "Smith", "Garcia", "Kim", "Nguyen", "Mueller", "Rossi", "Ivanov", "Patel", "Tanaka",
                  "Silva", "Cohen", "Novak", "Hrnjak", "Kirillov", "Okafor", "Johansson", "Dubois", "Li", "Zhang",
                  "Brown", "Lopez", "Schmidt", "Haddad", "Kowalski", "Andersen", "Moreau", "Costa", "Yilmaz",
                  "Sato", "Chen", "Popov", "Fischer", "Singh", "Murphy", "Bauer", "Rahman", "Ortiz", "Weber", "Park",
                  "Lindqvist", "Mendes", "Horvat", "Kaur", "Becker", "Walsh", "Suzuki", "Romano", "Petrov", "Ali")
MAG_INSTITUTION_PATTERNS = ("University of {p}", "{p} Institute of Technology", "{p} State University",
                            "Imperial College {p}", "{p} Research Center", "National University of {p}",
                            "{p} Polytechnic", "Max Planck Institute {p}")
MAG_PLACES = ("Westbridge", "Northfield", "Lakeside", "Eastvale", "Riverton", "Ashford", "Kingsport", "Maplewood",
              "Stonehaven", "Fairmont", "Oakridge", "Brighton", "Clearwater", "Redcliff", "Silverlake", "Greenwich",
              "Highland", "Pinecrest", "Harborview", "Elmstead", "London", "Zurich", "Kyoto", "Toronto", "Lyon")


_SYNONYM_OF = {w: group for group in SYNONYMS for w in group}


def swap_synonym(r: random.Random, phrase: str) -> str:
    """``phrase`` with the whole phrase or one word swapped for a synonym, each half of the time."""
    if phrase in _SYNONYM_OF and r.random() < 0.5:
        return r.choice(_SYNONYM_OF[phrase])
    words = phrase.split()
    hits = [i for i, w in enumerate(words) if w in _SYNONYM_OF]
    if hits and r.random() < 0.5:
        i = r.choice(hits)
        words[i] = r.choice(_SYNONYM_OF[words[i]])
    return " ".join(words)


def article(phrase: str) -> str:
    """``phrase`` with its indefinite article ("an acute ...", "a renal ...")."""
    return f"{'an' if phrase[:1].lower() in 'aeiou' else 'a'} {phrase}"
