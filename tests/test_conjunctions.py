"""The default decomposer's ``conjunctions`` and ``echoes`` filters (issue 23, item 2): facts joined
by "and" split one per conjunct on spaCy's parse, names, titles and quotations left whole, and a
fact that runs on into the prompt's instruction cut before it."""
from __future__ import annotations

import pytest
import spacy  # a runtime dependency (the reference's clean-up reads it too): no skip

from fscore_lite.factscore import fact_filters as ff
from fscore_lite.factscore.conjunctions import split_conjunctions


@pytest.fixture(scope="module")
def nlp():
    from fscore_lite.factscore.spacy_pipeline import SPACY_MODEL

    return spacy.load(SPACY_MODEL)


SPLIT = {
    "She earned a degree in drama and speech.": ["She earned a degree in drama.", "She earned a degree in speech."],
    # clauses: the subject (and the auxiliary, for a bare verb) copied
    "He has represented India at the 2016 South Asian Games and won a gold medal.":
        ["He has represented India at the 2016 South Asian Games.", "He has won a gold medal."],
    "He is an avid Cleveland sports fan, and regularly talks about the Browns.":
        ["He is an avid Cleveland sports fan.", "He regularly talks about the Browns."],
    # a modifier after the last conjunct is shared; a shared article agrees with its new word
    "The Milagro Foundation supports education, health, and the arts for underprivileged children.":
        ["The Milagro Foundation supports education for underprivileged children.",
         "The Milagro Foundation supports health for underprivileged children.",
         "The Milagro Foundation supports the arts for underprivileged children."],
    "He has written and directed several successful stage productions.":
        ["He has written several successful stage productions.", "He has directed several successful stage productions."],
    "Emily Taheny is an actress and singer.": ["Emily Taheny is an actress.", "Emily Taheny is a singer."],
    "The film starred Mohanlal and Ajay Devgn.": ["The film starred Mohanlal.", "The film starred Ajay Devgn."],
    # a second clause with its own subject: the joining ", and" goes with it
    "He won the race, and she lost the game.": ["He won the race.", "She lost the game."],
}

WHOLE = [
    "Santana was inducted into the Rock and Roll Hall of Fame.",  # inside a named entity
    "Eddy and Chepo Reynoso are people.",  # the subject
    'Nkosi\'s works include "Tasks and Masks: Themes and Styles of African Literature".',  # a quotation
    "She served as the Minister of State for Environment and Forests.",  # a title
    "Fran Unsworth is a journalist and media executive.",  # modifiers of one noun
    "He is a member of the NumPy and SciPy core development teams.",
    "He played for teams between 1960 and 1962.",
    "He was a painter or a sculptor.",  # only "and"
    "He was born in Ohio.",
]


@pytest.mark.parametrize("fact", sorted(SPLIT))
def test_split_one_fact_per_conjunct(nlp, fact):
    assert split_conjunctions([fact], nlp) == SPLIT[fact]


@pytest.mark.parametrize("fact", WHOLE)
def test_left_whole(nlp, fact):
    assert split_conjunctions([fact], nlp) == [fact]


def test_split_keeps_order_and_is_a_function_of_the_fact(nlp):
    facts = ["Ann Lee is a painter.", "She earned a degree in drama and speech.", "She was born in Ohio."]
    out = split_conjunctions(facts, nlp)
    assert out == [facts[0], *SPLIT[facts[1]], facts[2]]
    assert split_conjunctions(facts[1:2], nlp) == out[1:3]  # alone or among others, the same split
    assert len(split_conjunctions(["It sparked outrage and protests from journalists and activists."], nlp)) <= 4


def test_echo_of_the_instruction_is_cut():
    assert ff.cut_echo("He was a director. Please breakdown the following sentence into.") == "He was a director."
    assert ff.cut_echo("Please breakdown the following sentence into independent facts.") == ""
    assert ff.cut_echo("He was born in Ohio.") == "He was born in Ohio."
    assert ff.degenerate_kind("He sang. Please breakdown the following sentence.", []) == "echo"


def test_default_filters_split_and_cut_and_reference_keeps_them(nlp):
    pairs = [("s", ["She earned a degree in drama and speech. Please breakdown the following sentence.",
                    "She earned a degree in drama."])]
    # the echo cut, the split, then the duplicate of the first part dropped
    assert ff.apply_filters(pairs, nlp=nlp) == [("s", SPLIT["She earned a degree in drama and speech."])]
    assert ff.filters_of("reference")(pairs) == pairs
    alone = [("s", ["Emily Taheny is an actress and singer."])]
    assert ff.apply_filters(alone, ("conjunctions",), nlp=nlp) == [("s", SPLIT[alone[0][1][0]])]
    assert ff.apply_filters(alone, ("echoes", "loops"), nlp=nlp) == alone
