"""How people ask about the HPO graph: question patterns per ``hpo`` template and register (step 3 of the protocol).

Four registers: a **clinician** (differential diagnosis, gene panels), a patient's **family** (lay words, a
child's symptoms), a **researcher** (annotations, ontology terms) and **terse** search-box queries ("genes behind
marfan syndrome"). A pattern fills ``{a}``/``{b}`` (the anchors, in template path order), ``{T}`` (the plural
noun of the target type, or "forms of <name phrase>" when the property is one) and ``{P}`` (the property clause,
with its leading space, or nothing). Gene targets have no property (an hpo gene has no text), so their
patterns have no ``{P}``. Every pattern of a template must ask for exactly what the template's path means:
``parent-child|down`` targets are the anchor's direct sub-terms, ``|up`` its direct parents.
"""

from __future__ import annotations

REGISTERS = ("clinician", "family", "researcher", "terse")

# The plural noun of a target type, per register.
TARGET_NOUNS: dict[str, dict[str, tuple[str, ...]]] = {
    "disease": {
        "clinician": ("diseases", "disorders", "conditions", "diagnoses"),
        "family": ("conditions", "diseases", "illnesses"),
        "researcher": ("diseases", "disorders", "disease entries"),
        "terse": ("diseases", "disorders", "conditions"),
    },
    "phenotype": {
        "clinician": ("clinical features", "findings", "signs", "phenotypes"),
        "family": ("symptoms", "problems", "signs"),
        "researcher": ("HPO terms", "phenotype terms", "phenotypes"),
        "terse": ("features", "phenotypes", "symptoms"),
    },
    "gene": {r: ("genes",) for r in REGISTERS},
}

# ``{T}`` when the property is a phrase of the target disease's name ("forms of muscular dystrophy").
NAME_PHRASE_NOUNS = ("forms of {p}", "types of {p}", "{p} disorders")

# The property clause of a target, by the field its phrase comes from and register; ``{p}`` is the phrase.
PROPERTY_CLAUSES: dict[str, dict[str, tuple[str, ...]]] = {
    "inheritance": {
        "clinician": (" with {p}", " showing {p}"),
        "family": (" with {p}",),
        "researcher": (" annotated with {p}", " with {p}"),
        "terse": (" with {p}", ", {p}"),
    },
    "clinical_course": {
        "clinician": (" with {p}", " typically with {p}"),
        "family": (" with {p}",),
        "researcher": (" annotated with {p}", " whose clinical course is annotated as {p}"),
        "terse": (" with {p}", ", {p}"),
    },
    "clinical_modifier": {
        "clinician": (" with {p}",),
        "family": (" with {p}",),
        "researcher": (" annotated with the modifier {p}",),
        "terse": (", {p}",),
    },
    "definition": {
        "clinician": (" involving {p}", " defined by {p}"),
        "family": (" that involve {p}", " that have to do with {p}"),
        "researcher": (" whose definition mentions {p}", " defined in terms of {p}"),
        "terse": (" involving {p}", ", {p}"),
    },
    "synonyms": {
        "clinician": (" also called {p}", " (also known as {p})"),
        "family": (" that people call {p}", " sometimes called {p}"),
        "researcher": (" with the synonym {p}", " also labelled {p}"),
        "terse": (" aka {p}", " ({p})"),
    },
}

# Plain-language versions of the commonest disease course and inheritance terms, for the family register.
LAY_TERMS: dict[str, tuple[str, ...]] = {
    "autosomal recessive inheritance": ("autosomal recessive inheritance (both parents are carriers)",),
    "autosomal dominant inheritance": ("autosomal dominant inheritance (one parent passes it on)",),
    "infantile onset": ("infantile onset, starting in the first year",),
    "congenital onset": ("congenital onset, present from birth",),
    "neonatal onset": ("neonatal onset, in the first weeks of life",),
    "childhood onset": ("childhood onset",),
    "death in infancy": ("death in infancy",),
}

# Question patterns per template id and register.
PATTERNS: dict[str, dict[str, tuple[str, ...]]] = {
    "disease>associated with>gene": {
        "clinician": (
            "Which genes are implicated in {a}?",
            "What are the causative genes for {a}?",
            "Which genes should a panel for {a} include?",
        ),
        "family": (
            "My daughter was diagnosed with {a}. Which gene is behind it?",
            "What gene causes {a}?",
            "Our son has {a}. Which genes were found to cause this?",
        ),
        "researcher": ("List the genes associated with {a}.", "Which genes are annotated to {a}?"),
        "terse": ("genes behind {a}", "{a} genes", "{a} causal gene"),
    },
    "phenotype>associated with>gene": {
        "clinician": ("Which genes are associated with {a}?", "Candidate genes for a patient with {a}?"),
        "family": ("Which genes can cause {a}?", "Is there a gene that explains {a}?"),
        "researcher": ("Which genes are annotated with the phenotype {a}?", "List genes linked to {a}."),
        "terse": ("genes for {a}", "{a} genes"),
    },
    "disease>associated with>gene & phenotype>associated with>gene": {
        "clinician": (
            "Which gene linked to {a} also explains {b}?",
            "A patient suspected of {a} also has {b}: which genes fit both?",
        ),
        "family": ("Which gene behind {a} could also cause {b}?",),
        "researcher": ("Which genes are associated both with {a} and with the phenotype {b}?",),
        "terse": ("{a} genes with {b}", "genes for {a} and {b}"),
    },
    "phenotype>associated with>gene & phenotype>associated with>gene": {
        "clinician": ("Which genes are associated with both {a} and {b}?", "Candidate genes for {a} plus {b}?"),
        "family": ("My child has {a} and {b}. Which genes could cause both?",),
        "researcher": ("List genes annotated with {a} as well as {b}.",),
        "terse": ("genes {a} {b}", "genes for {a} and {b}"),
    },
    "gene>associated with>disease>associated with>gene": {
        "clinician": ("Which other genes cause the same disorders as {a}?",),
        "family": ("Which other genes can cause the conditions that {a} causes?",),
        "researcher": ("Which genes share an associated disease with {a}?", "List genes co-annotated with {a}."),
        "terse": ("genes sharing a disease with {a}",),
    },
    "phenotype>phenotype present>disease": {
        "clinician": (
            "Which {T}{P} present with {a}?",
            "Differential diagnosis for {a}: which {T}{P}?",
            "{T}{P} featuring {a}?",
        ),
        "family": ("My son has {a}. What {T}{P} could cause this?", "What {T}{P} come with {a}?"),
        "researcher": ("List {T}{P} annotated with {a}.", "Which {T}{P} have {a} as a feature?"),
        "terse": ("{T} with {a}{P}", "{a} {T}{P}"),
    },
    "gene>associated with>disease": {
        "clinician": ("Which {T}{P} are caused by variants in {a}?", "What {T}{P} is {a} associated with?"),
        "family": ("The test found a change in the {a} gene. Which {T}{P} is it linked to?",),
        "researcher": ("List {T}{P} associated with {a}.", "Which {T}{P} are linked to the gene {a}?"),
        "terse": ("{a} {T}{P}", "{T} caused by {a}{P}"),
    },
    "phenotype>phenotype absent>disease": {
        "clinician": ("Which {T}{P} typically do not show {a}?", "Which {T}{P} have {a} explicitly excluded?"),
        "family": ("Which {T}{P} are known not to cause {a}?",),
        "researcher": ("List {T}{P} annotated with {a} as absent.", "Which {T}{P} have a NOT annotation for {a}?"),
        "terse": ("{T} without {a}{P}", "{T}{P} lacking {a}"),
    },
    "phenotype>phenotype present>disease & gene>associated with>disease": {
        "clinician": (
            "Which {T}{P} linked to {b} present with {a}?",
            "Patient with {a} and a variant in {b}: which {T}{P}?",
        ),
        "family": ("My child has {a} and a change in the {b} gene. Which {T}{P} could it be?",),
        "researcher": ("Which {T}{P} associated with {b} are annotated with {a}?",),
        "terse": ("{b} {T} with {a}{P}", "{T} with {a}, {b} variant{P}"),
    },
    "phenotype>phenotype present>disease & phenotype>phenotype present>disease": {
        "clinician": (
            "Which {T}{P} present with both {a} and {b}?",
            "Differential for {a} with {b}: which {T}{P}?",
        ),
        "family": ("My daughter has {a} and {b}. What {T}{P} could explain both?",),
        "researcher": ("List {T}{P} annotated with {a} and {b}.",),
        "terse": ("{T} with {a} and {b}{P}", "{a} + {b} {T}{P}"),
    },
    "phenotype>parent-child|down>phenotype>phenotype present>disease": {
        "clinician": ("Which {T}{P} present with some specific form of {a}?",),
        "family": ("What {T}{P} cause a particular kind of {a}?",),
        "researcher": ("Which {T}{P} are annotated with a direct sub-term of {a}?",),
        "terse": ("{T} with a subtype of {a}{P}",),
    },
    "disease>associated with>gene>associated with>disease": {
        "clinician": (
            "Which other {T}{P} are caused by the same genes as {a}?",
            "Allelic {T}{P} of {a}?",
        ),
        "family": ("Which other {T}{P} come from the same genes as {a}?",),
        "researcher": ("Which {T}{P} share a causal gene with {a}?",),
        "terse": ("{T} sharing genes with {a}{P}",),
    },
    "disease>phenotype present>phenotype": {
        "clinician": ("Which {T}{P} are seen in {a}?", "What {T}{P} are typical of {a}?"),
        "family": ("Our son has {a}. What {T}{P} should we expect?", "What {T}{P} does {a} cause?"),
        "researcher": ("List the {T}{P} annotated to {a}.", "Which {T}{P} are annotated for {a}?"),
        "terse": ("{a} {T}{P}", "{T} of {a}{P}"),
    },
    "gene>associated with>phenotype": {
        "clinician": ("Which {T}{P} are associated with {a} variants?", "What {T}{P} do {a} mutations cause?"),
        "family": ("The {a} gene was found changed. What {T}{P} can that cause?",),
        "researcher": ("List {T}{P} linked to the gene {a}.", "Which {T}{P} are annotated to {a}?"),
        "terse": ("{a} {T}{P}", "{T} of {a} mutations{P}"),
    },
    "phenotype>parent-child|up>phenotype": {
        "clinician": ("What are the broader {T}{P} above {a}?", "Which {T}{P} directly generalize {a}?"),
        "family": ("What more general {T}{P} does {a} fall under?",),
        "researcher": ("Which {T}{P} are direct parents of {a} in HPO?", "Give the parent terms{P} of {a}."),
        "terse": ("parent of {a}{P}", "{a} broader term{P}"),
    },
    "phenotype>parent-child|down>phenotype": {
        "clinician": ("What are the more specific {T}{P} under {a}?", "Which subtypes of {a}{P} are described?"),
        "family": ("What kinds of {a}{P} are there?",),
        "researcher": ("Which {T}{P} are direct children of {a} in HPO?", "List the sub-terms of {a}{P}."),
        "terse": ("types of {a}{P}", "{a} subtypes{P}"),
    },
    "disease>phenotype absent>phenotype": {
        "clinician": ("Which {T}{P} are explicitly absent in {a}?", "What {T}{P} argue against {a}?"),
        "family": ("Which {T}{P} do people with {a} not have?",),
        "researcher": ("Which {T}{P} are annotated as NOT present in {a}?",),
        "terse": ("{T} absent in {a}{P}", "{a} excluded {T}{P}"),
    },
    "disease>phenotype present>phenotype & gene>associated with>phenotype": {
        "clinician": ("Which {T}{P} of {a} are linked to {b}?", "What {T}{P} of {a} relate to the gene {b}?"),
        "family": ("Which {T}{P} of {a} come from the {b} gene?",),
        "researcher": ("Which {T}{P} annotated to {a} are also associated with {b}?",),
        "terse": ("{a} {T} linked to {b}{P}",),
    },
}

# A context sentence some questions start with, per register (the terse register has none).
CONTEXTS: dict[str, tuple[str, ...]] = {
    "clinician": ("Quick question for a differential diagnosis.", "I'm a clinician looking into a case."),
    "family": ("Sorry if this is a silly question.", "We are trying to understand our child's diagnosis."),
    "researcher": ("For a genetics seminar:", "I'm curating annotations."),
    "terse": (),
}
