"""Property: whatever lines a file holds (valid records, mutated records, random bytes), ingest and
validate account for every one of them — valid + quarantined (or rejected) == input records — and
never raise. Bounded examples (tests/conftest.py: derandomized when CI=true)."""

from __future__ import annotations

import json
from pathlib import Path
from tempfile import TemporaryDirectory

from hypothesis import given, settings
from hypothesis import strategies as st

from mimesis_rl.data.ingest import SourceSpec, ingest
from mimesis_rl.data.jsonl import is_blank
from mimesis_rl.data.validation import TooManyBadRecords, ValidationSettings, validate_file


def _record(i: int, text: str) -> dict:
    return {"conversation_id": f"c{i}", "source": "prop", "domain": "test",
            "turns": [{"role": "user", "content": text or "hi"}, {"role": "assistant", "content": "ok"}]}


MUTATIONS = [
    lambda b, r: b[: len(b) // 2],                                   # cut short
    lambda b, r: b.replace(b'"user"', b'"usr"', 1),                   # a bad role
    lambda b, r: b.replace(b'"turns"', b'"turns": 1, "x"', 1),        # repeated key / wrong type
    lambda b, r: b.replace(b'"prop"', b"9" * 5000, 1),                # a 5000-digit integer
    lambda b, r: b.replace(b'"prop"', b"1e400", 1),                   # overflows a float
    lambda b, r: b.replace(b'"prop"', b"NaN", 1),                     # not JSON
    lambda b, r: b.replace(b'"prop"', b"[" * 200 + b"]" * 200, 1),    # nested too deep
    lambda b, r: b[:10] + r + b[10:],                                 # random bytes inside
    lambda b, r: b.replace(b'"hi"', b'"\\ud800"', 1),                 # a lone surrogate escape
    lambda b, r: b"\xef\xbb\xbf" + b,                                 # a BOM mid-file
    lambda b, r: b.replace(b"ok", b"o\\u0000k", 1),                    # NUL (kept, flagged)
]
RANDOM_BYTES = st.binary(max_size=40).map(lambda b: b.replace(b"\n", b" "))
TEXT = st.text(st.characters(codec="utf-8"), max_size=20).map(lambda t: t.replace("\n", " "))


@st.composite
def lines(draw: st.DrawFn) -> list[bytes]:
    out = []
    for i in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["valid", "mutated", "random", "blank"]))
        line = json.dumps(_record(i, draw(TEXT)), ensure_ascii=draw(st.booleans())).encode()
        if kind == "mutated":
            line = draw(st.sampled_from(MUTATIONS))(line, draw(RANDOM_BYTES))
        elif kind == "random":
            line = draw(RANDOM_BYTES)
        elif kind == "blank":
            line = draw(st.sampled_from([b"", b"  ", b"\t"]))
        out.append(line.replace(b"\n", b" "))
    return out


def _records(data: list[bytes]) -> int:
    return sum(not is_blank(x.removeprefix(b"\xef\xbb\xbf") if i == 0 else x) for i, x in enumerate(data))


@settings(max_examples=25)
@given(data=lines(), pii=st.sampled_from(["redact", "flag", "quarantine"]))
def test_validate_accounts_for_every_line(data: list[bytes], pii: str) -> None:
    with TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "in.jsonl").write_bytes(b"\n".join(data) + b"\n")
        expected = _records(data)
        try:
            report = validate_file(d / "in.jsonl", d / "v.jsonl", d / "q.jsonl",
                                   config=ValidationSettings(max_bad_share=1.0, pii_action=pii))
        except TooManyBadRecords as exc:  # cannot happen at 1.0, but the report is the point
            report = exc.report
        except Exception as exc:  # noqa: BLE001 - the property: only "no records" may stop it
            assert expected == 0 and "no records" in str(exc), exc
            return
        valid = (d / "v.jsonl").read_bytes().splitlines()
        quarantined = [json.loads(x) for x in (d / "q.jsonl").read_bytes().splitlines()]
        assert report.records == expected == report.valid + report.quarantined
        assert len(valid) == report.valid and len(quarantined) == report.quarantined
        assert all(q["reason"] and isinstance(q["line"], int) for q in quarantined)


@settings(max_examples=40)
@given(data=lines())
def test_ingest_accounts_for_every_line(data: list[bytes]) -> None:
    with TemporaryDirectory() as tmp:
        d = Path(tmp)
        source = d / "logs.jsonl"
        # the messages adapter's format: the same mutations, on OpenAI-style lines
        source.write_bytes(b"\n".join(x.replace(b'"turns"', b'"messages"') for x in data) + b"\n")
        report = ingest([SourceSpec("messages", str(source), {})], d / "out.jsonl", d / "rejects.jsonl")
        out = (d / "out.jsonl").read_bytes().splitlines()
        rejects = (d / "rejects.jsonl").read_bytes().splitlines()
        assert report.records_read == _records(data) == len(out) + len(rejects)
