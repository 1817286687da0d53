"""A synthetic language pair for examples/translation.py: no public parallel
corpus can be downloaded where sparq is built, so one is generated, with the
phenomena that make translation more than a word-for-word lookup.

The source language is German-like, the target English-like:

- **Agreement.** Source nouns have a gender (m/f/n) and a number; articles
  and adjective endings agree with gender, number and case (nominative for
  the subject, accusative for the object), verbs with the subject's number.
  The target marks number only (plural -s, 3rd person singular -s).
- **Word order.** Main clauses are verb-second: a sentence that opens with
  an adverb puts the verb before the subject ("heute sieht der hund ...",
  "today the dog sees ..."). The perfect puts the participle at the end
  ("der hund hat den ball gesehen", "the dog has seen the ball").
  Subordinate clauses (weil/dass) put the finite verb last ("weil die katze
  den ball sieht", "because the cat sees the ball").
- **Lexical ambiguity that context resolves.** Some source nouns have two
  senses (bank: bank or bench; schloss: castle or lock; ...), each going
  with one class of verbs; such a noun appears only in a clause whose verb
  selects one of its senses (half the time it can), and that verb may come
  after the noun (verb-final clauses), so the model must read the clause.
- **Free variation.** Many target words have synonyms drawn at random
  (big/large, child/kid, buy/purchase, because/since, ...; a source verb
  may translate to either of two target verbs), the adverb goes first or
  last, and "that" after a main clause is optional, so no model can be
  certain of every reference word: BLEU stays well below 100.

make_corpus(n, seed) returns n (source, target) sentence pairs, words
separated by single spaces; the same (n, seed) gives the same pairs.
"""
import random

# Nouns: source stem, gender, source plural suffix, target word. Ambiguous
# nouns list two senses, each with the verb class that selects it.
NOUNS = [
    ("hund", "m", "e", ("dog",)), ("katze", "f", "n", ("cat",)), ("kind", "n", "er", ("child", "kid")),
    ("mann", "m", "er", ("man",)), ("frau", "f", "en", ("woman", "lady")), ("vogel", "m", "", ("bird",)),
    ("buch", "n", "er", ("book",)), ("ball", "m", "e", ("ball",)), ("tisch", "m", "e", ("table", "desk")),
    ("stadt", "f", "e", ("city", "town")), ("haus", "n", "er", ("house", "home")), ("apfel", "m", "", ("apple",)),
    ("brief", "m", "e", ("letter",)), ("lehrer", "m", "", ("teacher",)), ("blume", "f", "n", ("flower",)),
    ("auto", "n", "s", ("car", "automobile")), ("baum", "m", "e", ("tree",)), ("fenster", "n", "", ("window",)),
    ("schule", "f", "n", ("school",)), ("freund", "m", "e", ("friend", "pal")), ("tür", "f", "en", ("door",)),
    ("pferd", "n", "e", ("horse",)), ("lied", "n", "er", ("song", "tune")), ("brot", "n", "e", ("bread",)),
]
AMBIGUOUS = [  # stem, gender, plural suffix, {verb class: target}
    ("bank", "f", "en", {"money": "bank", "rest": "bench"}),
    ("schloss", "n", "er", {"visit": "castle", "open": "lock"}),
    ("leiter", "f", "n", {"climb": "ladder", "meet": "leader"}),
    ("strauss", "m", "e", {"see": "ostrich", "give": "bouquet"}),
]
# Verbs: source stem, participle, target synonyms (base, 3sg, participle), class.
VERBS = [
    ("seh", "gesehen", ("see", "sees", "seen"), "see"),
    ("find", "gefunden", ("find", "finds", "found"), "see"),
    ("kauf", "gekauft", ("buy", "buys", "bought"), "give"),
    ("kauf", "gekauft", ("purchase", "purchases", "purchased"), "give"),
    ("geb", "gegeben", ("give", "gives", "given"), "give"),
    ("brauch", "gebraucht", ("need", "needs", "needed"), "money"),
    ("leih", "geliehen", ("borrow", "borrows", "borrowed"), "money"),
    ("besuch", "besucht", ("visit", "visits", "visited"), "visit"),
    ("besuch", "besucht", ("see", "sees", "seen"), "visit"),
    ("bau", "gebaut", ("build", "builds", "built"), "visit"),
    ("öffn", "geöffnet", ("open", "opens", "opened"), "open"),
    ("schliess", "geschlossen", ("close", "closes", "closed"), "open"),
    ("besteig", "bestiegen", ("climb", "climbs", "climbed"), "climb"),
    ("trag", "getragen", ("carry", "carries", "carried"), "climb"),
    ("treff", "getroffen", ("meet", "meets", "met"), "meet"),
    ("treff", "getroffen", ("encounter", "encounters", "encountered"), "meet"),
    ("frag", "gefragt", ("ask", "asks", "asked"), "meet"),
    ("bemal", "bemalt", ("paint", "paints", "painted"), "rest"),
    ("putz", "geputzt", ("clean", "cleans", "cleaned"), "rest"),
    ("putz", "geputzt", ("wash", "washes", "washed"), "rest"),
]
ADJECTIVES = [("gross", ("big", "large")), ("klein", ("small", "little")), ("alt", ("old", "aged")),
              ("neu", ("new",)), ("rot", ("red",)), ("schön", ("beautiful", "pretty", "lovely")),
              ("schnell", ("fast", "quick")), ("müd", ("tired", "sleepy"))]
ADVERBS = [("heute", "today"), ("morgen", "tomorrow"), ("oft", "often"), ("gestern", "yesterday"),
           ("manchmal", "sometimes"), ("leider", "unfortunately")]
# Article by (gender or plural, case); adjective ending after a definite article.
DEFINITE = {("m", "nom"): "der", ("m", "acc"): "den", ("f", "nom"): "die", ("f", "acc"): "die",
            ("n", "nom"): "das", ("n", "acc"): "das", ("pl", "nom"): "die", ("pl", "acc"): "die"}
INDEFINITE = {("m", "nom"): "ein", ("m", "acc"): "einen", ("f", "nom"): "eine", ("f", "acc"): "eine",
              ("n", "nom"): "ein", ("n", "acc"): "ein"}
ADJ_AFTER_DEFINITE = {("m", "nom"): "e", ("m", "acc"): "en", ("f", "nom"): "e", ("f", "acc"): "e",
                      ("n", "nom"): "e", ("n", "acc"): "e", ("pl", "nom"): "en", ("pl", "acc"): "en"}
ADJ_AFTER_INDEFINITE = {("m", "nom"): "er", ("m", "acc"): "en", ("f", "nom"): "e", ("f", "acc"): "e",
                        ("n", "nom"): "es", ("n", "acc"): "es"}


def noun_phrase(rng, case, verb_class):
    """(source words, target words, plural) of a noun phrase in `case`."""
    plural = rng.random() < 0.3
    fitting = [a for a in AMBIGUOUS if verb_class in a[3]]  # ambiguous nouns this clause's verb resolves
    if fitting and rng.random() < 0.5:
        stem, gender, suffix, senses = rng.choice(fitting)
        target_noun = senses[verb_class]
    else:
        stem, gender, suffix, synonyms = rng.choice(NOUNS)
        target_noun = rng.choice(synonyms)
    key = ("pl" if plural else gender, case)
    definite = plural or rng.random() < 0.6
    src, tgt = [DEFINITE[key] if definite else INDEFINITE[key]], ["the" if definite else "a"]
    if plural and not definite:
        src, tgt = [], ["some"]
    if rng.random() < 0.35:
        adj, choices = rng.choice(ADJECTIVES)
        src.append(adj + (ADJ_AFTER_DEFINITE if definite else ADJ_AFTER_INDEFINITE).get(key, "e"))
        tgt.append(rng.choice(choices))
    src.append(stem + (suffix if plural else ""))
    tgt.append(target_noun + ("s" if plural else ""))
    return src, tgt, plural


def clause(rng, order):
    """A transitive clause: order is 'main' (verb second), 'inverted'
    (adverb first, verb before subject) or 'sub' (verb last)."""
    stem, participle, (base, third, past), verb_class = rng.choice(VERBS)
    subj_src, subj_tgt, subj_plural = noun_phrase(rng, "nom", verb_class)
    obj_src, obj_tgt, _ = noun_phrase(rng, "acc", verb_class)
    perfect = rng.random() < 0.3
    if perfect:
        finite_src, rest_src = ("haben" if subj_plural else "hat"), [participle]
        verb_tgt = [("have" if subj_plural else "has"), past]
    else:
        finite_src, rest_src = stem + ("en" if subj_plural else "t"), []
        verb_tgt = [base if subj_plural else third]
    tgt = subj_tgt + verb_tgt + obj_tgt
    if order == "sub":
        return subj_src + obj_src + rest_src + [finite_src], tgt
    if order == "inverted":
        return [finite_src] + subj_src + obj_src + rest_src, tgt
    return subj_src + [finite_src] + obj_src + rest_src, tgt


def sentence(rng):
    if rng.random() < 0.4:
        adv_src, adv_tgt = rng.choice(ADVERBS)
        src, tgt = clause(rng, "inverted")
        src, tgt = [adv_src] + src, ([adv_tgt] + tgt if rng.random() < 0.5 else tgt + [adv_tgt])
    else:
        src, tgt = clause(rng, "main")
    r = rng.random()
    if r < 0.25:
        sub_src, sub_tgt = clause(rng, "sub")
        src, tgt = src + [",", "weil"] + sub_src, tgt + [",", rng.choice(("because", "since"))] + sub_tgt
    elif r < 0.4:
        sub_src, sub_tgt = clause(rng, "sub")
        src, tgt = src + [",", "dass"] + sub_src, tgt + (["that"] if rng.random() < 0.5 else []) + sub_tgt
    return " ".join(src + ["."]), " ".join(tgt + ["."])


def make_corpus(n, seed):
    rng = random.Random(seed)
    return [sentence(rng) for _ in range(n)]


if __name__ == "__main__":
    for s, t in make_corpus(8, 1):
        print(s, "|||", t)
