"""The worked example of docs/python-api.md (run from the repository root)."""

from rasp_compiler import pyapi as rasp

opp = (rasp.length - rasp.indices - 1).named("opp")
flip = rasp.Select(rasp.indices, opp, rasp.Comparison.EQ).named("flip")
reverse = rasp.Aggregate(flip, rasp.tokens).named("reverse")
vowel = rasp.Map(lambda t: t in "aeiou", rasp.tokens).named("vowel")

print(rasp.run(reverse, "hello"))
model = rasp.compile_program(reverse, vocab="ehlo", max_len=8)
print(model.run(["hello", "oh"]))
print(model.summary())
print(rasp.to_source(reverse.program()))
print(rasp.to_source(vowel.program(), vocab="ehlo", max_len=8))
