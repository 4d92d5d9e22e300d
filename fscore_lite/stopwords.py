"""Function words left out when content words of a fact, a page or an answer are compared.

A leaf module (no imports), so the light commands can read it without loading a store."""

STOPWORDS = frozenset("""
a an the of in on at to for and or but nor is was were are be been being am by with as from that this these
those it its his her hers him he she they them their theirs has have had having do does did also not no
into onto over under about after before during between through than then there here which who whom whose
what when where while why how all any both each few more most other some such only own same so too very
can could will would shall should may might must one s t just up out off again further once until
""".split())
