"""The worked example of docs/api.md (run from the repository root: python docs/api_example.py)."""

from rasp_compiler.lang import evaluate, load_program, parse_source, program_from_source, run

source = """
flip = select(indices, length - indices - 1, ==);
reverse = aggregate(flip, tokens);
hist = selector_width(select(tokens, tokens, ==));
reverse;
"""
program = program_from_source(source, file="reverse.rasp")
print(program)
print(run(program, "hello"))
print(run(program, "hello", output="hist"))

# The graph: a networkx DiGraph; node attribute "node" holds the dataclass.
for node in program.nodes():  # topological order
    print(f"{node.id:15} {node.kind:15} inputs={node.inputs}")

node = program.node("flip")
print(node.op, node.pos)
print(program.node("sequence_map_1").fn)

values = evaluate(program, "abc")       # every node's value
print(values["flip"].astype(int).tolist())

tree = parse_source("x = 1 + 2 * 3;")
print(tree.children[0].pretty().strip().splitlines()[:3])
print(run(load_program("programs/sort.rasp"), "banana"))
