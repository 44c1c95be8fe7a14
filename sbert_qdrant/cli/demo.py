"""``sbert-qdrant demo``: index real Quora questions into embedded Qdrant Edge and search for their duplicates.

Reads a Quora Question Pairs JSONL (question1, question2, is_duplicate), holds out the second question of a few
duplicate pairs, indexes every other question, then asks for each held-out question's duplicates and shows whether
Quora's known partner comes back first.

The sample is not shipped inside the package: ``--data PATH``, else ``examples/data/quora_pairs_sample.jsonl``
under the current directory, else under the source checkout this package runs from (an editable install).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from ..errors import InvalidInputError
from ..files import read_rows
from ._load import add_load_options, encoder_spec

#: The sample's place in a source checkout.
SAMPLE = Path("examples") / "data" / "quora_pairs_sample.jsonl"
#: The checkout this module runs from, when installed editable (sbert_qdrant/cli/demo.py -> the repository root).
CHECKOUT = Path(__file__).resolve().parents[2]


def find_data(given: str | None = None) -> Path:
    """The demo's Quora pairs file: ``given``, else the sample under the current directory, else under the checkout."""
    if given is not None:
        return Path(given)  # read_rows reports a missing file, naming it
    tried = [Path.cwd() / SAMPLE, CHECKOUT / SAMPLE]
    for path in tried:
        if path.is_file():
            return path
    raise InvalidInputError(
        f"the demo's Quora sample was not found (tried {', '.join(str(p) for p in dict.fromkeys(tried))}); pass "
        "--data PATH to a Quora pairs JSONL (question1, question2, is_duplicate), such as the source repository's "
        f"{SAMPLE.as_posix()}."
    )


def held_out_pairs(pairs: list[dict[str, object]], count: int) -> list[tuple[str, str]]:
    """(new question, its known duplicate) for the first ``count`` duplicate pairs whose new question is unique."""
    seen: dict[str, int] = {}
    for pair in pairs:
        for key in ("question1", "question2"):
            question = str(pair[key])
            seen[question] = seen.get(question, 0) + 1
    chosen = []
    for pair in pairs:
        new, known = str(pair["question2"]), str(pair["question1"])
        duplicate = str(pair["is_duplicate"]).strip().lower() in ("1", "true")  # JSON 1/true, or CSV/TSV text
        if duplicate and seen[new] == 1 and new != known:
            chosen.append((new, known))
        if len(chosen) == count:
            break
    return chosen


def _demo(args: argparse.Namespace) -> int:
    path = find_data(args.data)
    columns = ("question1", "question2", "is_duplicate")
    pairs = [row for _, row in read_rows(path, columns=columns, fix="pass --data PATH to a Quora pairs file")]
    probes = held_out_pairs(pairs, args.queries)
    hidden = {new for new, _ in probes}
    questions = list(dict.fromkeys(str(p[k]) for p in pairs for k in ("question1", "question2")))
    stored = [q for q in questions if q not in hidden and q.strip()]
    from ..collection import TextCollection

    with tempfile.TemporaryDirectory(prefix="sbert-qdrant-demo-") as scratch:
        location = args.location or scratch
        encoder = encoder_spec(args).load()
        with TextCollection("quora_demo", encoder, location=location, show_progress_bar=args.progress) as coll:
            start = time.perf_counter()
            coll.upsert_texts(stored)
            coll.optimize()
            took = time.perf_counter() - start
            print(f"indexed {coll.count()} Quora questions into Qdrant Edge at {location} in {took:.1f} s")
            print(f"encoder: {encoder!r}\n")
            results = coll.search_texts([new for new, _ in probes], limit=3)
    first = 0
    for (new, known), hits in zip(probes, results, strict=True):
        print(f"new question: {new}")
        for rank, hit in enumerate(hits, 1):
            mark = "  <- Quora's duplicate" if hit.text == known else ""
            print(f"   {rank}. {hit.score:.3f}  {hit.text}{mark}")
        first += bool(hits) and hits[0].text == known
        print()
    print(f"the known duplicate came back first for {first} of {len(probes)} new questions")
    return 0


def add_commands(commands: argparse._SubParsersAction) -> None:
    demo = commands.add_parser("demo", help="index real Quora questions and search for duplicates of new ones")
    demo.add_argument(
        "--data",
        default=None,
        metavar="PATH",
        help=f"Quora pairs JSONL/CSV/TSV (default: {SAMPLE.as_posix()} here, else in the source checkout)",
    )
    demo.add_argument("--queries", type=int, default=5, help="new questions to look up")
    demo.add_argument("--location", default=None, help="keep the Edge collection in this folder (default: temporary)")
    add_load_options(demo)
    demo.add_argument("--no-progress", dest="progress", action="store_false", help="hide progress bars")
    demo.set_defaults(run=_demo)
