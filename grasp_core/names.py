"""The names the command line offers as choices: profiles, graph store backends, plan traversals, entity extractors.

They live apart from the modules that implement them (:mod:`grasp_core.profiles`, :mod:`grasp_core.components`),
which import the whole library, so that parsing a command line imports nothing heavy: ``grasp query --server`` and
``grasp --help`` answer without loading torch, pandas or the configs.
"""

PROFILE_NAMES = ("cpu", "gpu", "smoke", "gpu-smoke")
GRAPH_STORES = ("ladybug", "neo4j")
TRAVERSALS = ("arrays", "store")
EXTRACTORS = ("gazetteer", "llm")
