# ruff: noqa: E501  (a table: one case per row reads better than rows wrapped at 110 columns)
"""Bad input and faults, as a new user meets them, across every command and stage that reads data.

Each row runs one command in-process (typer's CliRunner, or the stage runner) and asserts:
the exit code; a message naming the path, line or field; no traceback; and record accounting —
valid + quarantined == input records, every passing record byte for byte its input line, every
quarantined one carrying its raw line (and its bytes when they are not UTF-8); when a command
refuses to start, the files it was given are untouched.

`sim eval` and `envs rollout` rows stop in input validation, before any model is loaded.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from mimesis_rl.cli import app

ROOT_USER = hasattr(os, "geteuid") and os.geteuid() == 0
runner = CliRunner()


def conv(cid: str, *texts: str, **extra: object) -> dict:
    """A schema-valid conversation; texts alternate user / assistant."""
    turns = [{"role": "user" if i % 2 == 0 else "assistant", "content": t} for i, t in enumerate(texts)]
    return {"conversation_id": cid, "source": "table", "domain": "test", "turns": turns, **extra}


def line(obj: dict) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def msg(*texts: str, **extra: object) -> dict:
    """A `messages`-adapter line."""
    roles = ("user", "assistant")
    return {"messages": [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)], **extra}


VAL = ["data", "validate", "--input", "{d}/in.jsonl", "--output", "{d}/v.jsonl", "--quarantine", "{d}/q.jsonl"]
ACCOUNT = ("validate", "in.jsonl", "v.jsonl", "q.jsonl")
GOOD = [line(conv(f"good-{i}", f"hello {i}", "hi, how can I help?")) for i in range(3)]
GOOD_FILE = b"".join(g + b"\n" for g in GOOD)


def jsonl(*lines: bytes) -> bytes:
    return b"".join(x + b"\n" for x in lines)


@dataclass
class Case:
    """One row: files to create (name -> bytes, or a link/folder spec), the argv, what must happen."""

    id: str
    argv: list[str]
    code: int
    says: list[str]  # substrings of the output; `{d}` is the case folder
    files: dict[str, bytes | str] = field(default_factory=dict)  # str: "dir", "link:<target>", "hard:<t>"
    account: tuple[str, ...] = ()  # (kind, input, passed, quarantined) - see `check_accounting`
    untouched: tuple[str, ...] = ()  # files that must keep their bytes
    absent: tuple[str, ...] = ()  # files that must not be created
    stage: str | None = None  # run the stage with this params.yaml section instead of a command
    check: Callable[[Path], None] | None = None
    skip_root: bool = False


def _make(d: Path, files: dict[str, bytes | str]) -> None:
    for name, content in files.items():
        path = d / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if content == "dir":
            path.mkdir(exist_ok=True)
        elif content == "ro-dir":
            path.mkdir(exist_ok=True)
            path.chmod(0o555)
        elif content == "unreadable":
            path.write_bytes(GOOD_FILE)
            path.chmod(0)
        elif isinstance(content, str) and content.startswith("link:"):
            path.symlink_to(d / content[5:])
        elif isinstance(content, str) and content.startswith("hard:"):
            os.link(d / content[5:], path)
        elif content == "fifo":
            os.mkfifo(path)
        elif content == "loop":  # a symlink to a symlink back to it
            path.symlink_to(path.with_name(path.name + ".loop"))
            path.with_name(path.name + ".loop").symlink_to(path)
        else:
            assert isinstance(content, bytes)
            path.write_bytes(content)


def records(data: bytes) -> list[bytes]:
    """The records of a JSONL file as the tools count them: lines that are not JSON whitespace."""
    data = data.removeprefix(b"\xef\xbb\xbf")
    return [x for x in data.split(b"\n") if x.strip(b" \t\r\n")]


def check_accounting(d: Path, kind: str, source: str, passed: str, quarantined: str) -> None:
    """valid + quarantined == input; passing records unchanged; quarantined ones keep their bytes."""
    source_records = records((d / source).read_bytes())
    out = records((d / passed).read_bytes())
    bad = [json.loads(x) for x in records((d / quarantined).read_bytes())]
    assert len(out) + len(bad) == len(source_records), (len(out), len(bad), len(source_records))
    if kind == "validate":  # the valid file holds the input lines themselves
        assert all(x in source_records for x in out)
        for q in bad:
            raw = base64.b64decode(q["raw_base64"]) if "raw_base64" in q else q["raw"].encode("utf-8")
            assert raw == source_records[q["line"] - 1] or raw in source_records
    else:  # ingest / label rewrite records; each reject names its line
        lines = sorted(q["line"] for q in bad)
        assert len(set(lines)) == len(lines)


CASES: list[Case] = [
    # ---- data validate: two roles on one file --------------------------------------------------
    Case("validate-output-is-quarantine",
         ["data", "validate", "--input", "{d}/in.jsonl", "--output", "{d}/x.jsonl", "--quarantine", "{d}/x.jsonl"],
         2, ["{d}/x.jsonl", "quarantine is the same file as output"], {"in.jsonl": GOOD_FILE},
         untouched=("in.jsonl",), absent=("x.jsonl",)),
    Case("validate-output-is-input",
         ["data", "validate", "--input", "{d}/in.jsonl", "--output", "{d}/in.jsonl", "--quarantine", "{d}/q.jsonl"],
         2, ["{d}/in.jsonl", "output is the same file as input"], {"in.jsonl": GOOD_FILE},
         untouched=("in.jsonl",), absent=("q.jsonl",)),
    Case("validate-quarantine-symlink-to-input",
         VAL,
         2, ["{d}/q.jsonl", "quarantine is the same file as input", "resolve to"],
         {"in.jsonl": GOOD_FILE, "q.jsonl": "link:in.jsonl"}, untouched=("in.jsonl",), absent=("v.jsonl",)),
    Case("validate-relative-output-is-input",
         ["data", "validate", "--input", "{d}/in.jsonl", "--output", "{d}/sub/../in.jsonl",
          "--quarantine", "{d}/q.jsonl"],
         2, ["output is the same file as input"], {"in.jsonl": GOOD_FILE, "sub": "dir"}, untouched=("in.jsonl",)),
    Case("validate-quarantine-hard-link-of-input",
         VAL,
         2, ["quarantine is the same file as input"], {"in.jsonl": GOOD_FILE, "q.jsonl": "hard:in.jsonl"},
         untouched=("in.jsonl",)),
    Case("validate-output-inside-data-docs",
         ["data", "validate", "--input", "{d}/in.jsonl", "--output", "{d}/rep/data_docs/v.jsonl",
          "--quarantine", "{d}/q.jsonl", "--report-dir", "{d}/rep"],
         2, ["{d}/rep/data_docs/v.jsonl", "inside the Data Docs folder"], {"in.jsonl": GOOD_FILE}),
    Case("validate-output-is-gx-result-file",
         ["data", "validate", "--input", "{d}/in.jsonl", "--output", "{d}/rep/gx_validation_result.json",
          "--quarantine", "{d}/q.jsonl", "--report-dir", "{d}/rep"],
         2, ["same file as output"], {"in.jsonl": GOOD_FILE}),
    # ---- data validate: paths that cannot be read or written ----------------------------------
    Case("validate-input-is-folder",
         ["data", "validate", "--input", "{d}/folder", "--output", "{d}/v.jsonl", "--quarantine", "{d}/q.jsonl"],
         2, ["{d}/folder", "is a folder"], {"folder": "dir"}, absent=("v.jsonl", "q.jsonl")),
    Case("validate-input-missing",
         ["data", "validate", "--input", "{d}/nope.jsonl", "--output", "{d}/v.jsonl", "--quarantine", "{d}/q.jsonl"],
         2, ["{d}/nope.jsonl: file not found"], absent=("v.jsonl", "q.jsonl")),
    Case("validate-input-unreadable",
         VAL,
         2, ["{d}/in.jsonl", "Permission denied"], {"in.jsonl": "unreadable"}, skip_root=True),
    Case("validate-output-folder-read-only",
         ["data", "validate", "--input", "{d}/in.jsonl", "--output", "{d}/ro/v.jsonl", "--quarantine", "{d}/q.jsonl"],
         2, ["{d}/ro/v.jsonl", "not writable"], {"in.jsonl": GOOD_FILE, "ro": "ro-dir"}, skip_root=True),
    Case("validate-output-under-a-file",
         ["data", "validate", "--input", "{d}/in.jsonl", "--output", "{d}/in.jsonl/v.jsonl",
          "--quarantine", "{d}/q.jsonl"],
         2, ["{d}/in.jsonl/v.jsonl", "is a file, not a folder"], {"in.jsonl": GOOD_FILE}, untouched=("in.jsonl",)),
    Case("validate-output-is-folder",
         ["data", "validate", "--input", "{d}/in.jsonl", "--output", "{d}/folder", "--quarantine", "{d}/q.jsonl"],
         2, ["{d}/folder", "is a folder"], {"in.jsonl": GOOD_FILE, "folder": "dir"}),
    Case("validate-max-bad-share-negative",
         [*VAL, "--max-bad-share", "-0.1"],
         2, ["--max-bad-share"], {"in.jsonl": GOOD_FILE}, absent=("v.jsonl",)),
    Case("validate-max-bad-share-percent",
         [*VAL, "--max-bad-share", "5"],
         2, ["--max-bad-share"], {"in.jsonl": GOOD_FILE}, absent=("v.jsonl",)),
    # ---- data validate: bytes, duplicates, odd lines ------------------------------------------
    Case("validate-invalid-utf8-is-quarantined-not-replaced",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:2: not UTF-8 at byte 108 (0xff)"],
         {"in.jsonl": jsonl(GOOD[0], line(conv("latin", "caf\u00e9 please", "ok")).replace(b"\xc3\xa9", b"\xff"),
                            GOOD[1])},
         account=ACCOUNT),
    Case("validate-bom-is-accepted",
         VAL,
         0, ["3 records: 3 valid"], {"in.jsonl": b"\xef\xbb\xbf" + GOOD_FILE},
         account=ACCOUNT),
    Case("validate-duplicate-id-keeps-first",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:3: conversation_id: id 'good-0' already used on line 1, which is kept"],
         {"in.jsonl": jsonl(GOOD[0], GOOD[1], line(conv("good-0", "another talk", "sure")))},
         account=ACCOUNT,
         check=lambda d: _valid_ids(d, ["good-0", "good-1"])),
    Case("validate-identical-lines-keep-first",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:2:", "already used on line 1", "same turns as the record on line 1"],
         {"in.jsonl": jsonl(GOOD[0], GOOD[0], GOOD[2])},
         account=ACCOUNT,
         check=lambda d: _valid_ids(d, ["good-0", "good-2"])),
    Case("validate-copy-of-a-quarantined-record-stays",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:2: conversation_id: id 'good-0' already used on line 1"],
         {"in.jsonl": jsonl(GOOD[0], line(conv("good-0", "new words", "yes")), line(conv("c", "new words", "yes")))},
         account=ACCOUNT,
         check=lambda d: _valid_ids(d, ["good-0", "c"])),
    Case("validate-id-of-a-dropped-copy-stays-free",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:2: turns: same turns as the record on line 1, which is kept"],
         {"in.jsonl": jsonl(GOOD[0], line(conv("b", "hello 0", "hi, how can I help?")), line(conv("b", "other", "ok")))},
         account=ACCOUNT,
         check=lambda d: _valid_ids(d, ["good-0", "b"])),
    Case("validate-crlf-lines-pass-byte-for-byte",
         VAL,
         0, ["3 records: 3 valid"], {"in.jsonl": b"".join(g + b"\r\n" for g in GOOD)},
         account=ACCOUNT,
         check=lambda d: _same_bytes(d / "v.jsonl", d / "in.jsonl")),
    Case("validate-invisible-line-is-not-blank",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:2: malformed JSON"], {"in.jsonl": jsonl(GOOD[0], "\u00a0".encode(), GOOD[1])},
         account=ACCOUNT),
    Case("validate-repeated-key",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:2: malformed JSON: key 'conversation_id' appears twice"],
         {"in.jsonl": jsonl(GOOD[0], GOOD[1].replace(b'{"conversation_id"', b'{"conversation_id": "x", '
                                                                           b'"conversation_id"'), GOOD[2])},
         account=ACCOUNT),
    Case("validate-nan-is-not-json",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:1: malformed JSON: NaN is not standard JSON"],
         {"in.jsonl": jsonl(GOOD[0].replace(b'"source"', b'"outcome": {"score": NaN}, "source"'), GOOD[1], GOOD[2])},
         account=ACCOUNT),
    Case("validate-lone-surrogate",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:2: lone surrogate \\ud800"],
         {"in.jsonl": jsonl(GOOD[0], line(conv("s", "x", "y")).replace(b'"x"', b'"\\ud800"'), GOOD[1])},
         account=ACCOUNT),
    Case("validate-last-line-without-newline",
         VAL,
         0, ["3 records: 3 valid"], {"in.jsonl": GOOD_FILE.rstrip(b"\n")},
         account=ACCOUNT),
    Case("validate-too-many-bad-exits-1-after-writing",
         VAL,
         1, ["{d}/in.jsonl: 1 of 2 records are bad", "{d}/in.jsonl:2: turns: Input should be a valid list"],
         {"in.jsonl": jsonl(GOOD[0], line({**conv("t", "a", "b"), "turns": "hi"}))},
         account=ACCOUNT),
    Case("validate-pii-redact",
         [*VAL, "--pii-action", "redact", "--report-dir", "{d}/rep"],
         0, ["PII redacted: 1 turns in 1 records", "'card': 1", "'phone': 1"],
         {"in.jsonl": jsonl(GOOD[0], line(conv("p", "card 4111 1111 1111 1111, call +44 20 7946 0958", "ok")))},
         check=lambda d: _redacted(d)),
    # ---- data validate: values no reader can hold, paths that never end (issue 28) -----------------
    Case("validate-5000-digit-integer",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:2: malformed JSON: an integer of 5000 digits is out of the 64-bit range"],
         {"in.jsonl": jsonl(GOOD[0], GOOD[1].replace(b'"source"', b'"n": ' + b"9" * 5000 + b', "source"'), GOOD[2])},
         account=ACCOUNT),
    Case("validate-1e400-is-not-inf",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:2: malformed JSON: the number 1e400 overflows a float"],
         {"in.jsonl": jsonl(GOOD[0], GOOD[1].replace(b'"source"', b'"x": 1e400, "source"'), GOOD[2])},
         account=ACCOUNT),
    Case("validate-deep-nesting",
         [*VAL, "--max-bad-share", "0.5"],
         0, ["{d}/in.jsonl:2: malformed JSON: nested deeper than 64 levels"],
         {"in.jsonl": jsonl(GOOD[0], GOOD[1].replace(b'"source"', b'"x": ' + b"[" * 10**5 + b"]" * 10**5
                                                     + b', "source"'), GOOD[2])},
         account=ACCOUNT),
    Case("validate-input-is-a-device",
         ["data", "validate", "--input", "/dev/zero", "--output", "{d}/v.jsonl", "--quarantine", "{d}/q.jsonl"],
         2, ["/dev/zero: input is a device, not a regular file"], absent=("v.jsonl", "q.jsonl")),
    Case("validate-input-is-a-fifo",
         VAL,
         2, ["{d}/in.jsonl: input is a named pipe (FIFO), not a regular file"], {"in.jsonl": "fifo"},
         absent=("v.jsonl", "q.jsonl")),
    Case("validate-output-symlink-is-written-through",
         VAL,
         0, ["3 records: 3 valid"], {"in.jsonl": GOOD_FILE, "real.jsonl": b"old\n", "v.jsonl": "link:real.jsonl"},
         check=lambda d: _written_through(d)),
    Case("validate-output-symlink-loop",
         VAL,
         2, ["{d}/v.jsonl: output is a symlink that cannot be followed"], {"in.jsonl": GOOD_FILE, "v.jsonl": "loop"},
         untouched=("in.jsonl",), absent=("q.jsonl",)),
    Case("validate-nul-and-bidi-are-flagged",
         VAL,
         0, ["3 records: 3 valid", "flagged (kept): {d}/in.jsonl:2: turns[0].content: content holds a NUL",
             "flagged (kept): {d}/in.jsonl:3: turns[0].content: content holds a bidirectional override"],
         {"in.jsonl": jsonl(GOOD[0], line(conv("n", "a\x00b", "ok")), line(conv("b", "pay \u202eevil", "ok")))},
         account=ACCOUNT),
    Case("validate-pii-redacted-by-default",
         VAL,
         0, ["PII redacted: 1 turns in 1 records; 2 values redacted"],
         {"in.jsonl": jsonl(GOOD[0], line(conv("p", "mail a@b.org or call +44 20 7946 0958", "ok")))},
         check=lambda d: _no_pii_left(d)),
    # ---- data ingest ----------------------------------------------------------------------------
    Case("ingest-input-is-a-fifo",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs.jsonl", "--output", "{d}/o.jsonl"],
         2, ["{d}/logs.jsonl: input is a named pipe (FIFO)"], {"logs.jsonl": "fifo"}, absent=("o.jsonl",)),
    Case("ingest-image-part-kept-as-placeholder",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs.jsonl", "--output", "{d}/o.jsonl",
          "--rejects", "{d}/r.jsonl"],
         0, ["wrote 1 conversations"],
         {"logs.jsonl": jsonl(line({"messages": [
             {"role": "user", "content": [{"type": "text", "text": "what is it?"},
                                          {"type": "image_url", "image_url": {"url": "https://x/cat.png"}}]},
             {"role": "assistant", "content": "a cat"}]}))},
         account=("ingest", "logs.jsonl", "o.jsonl", "r.jsonl"), check=lambda d: _image_kept(d)),
    Case("ingest-document-with-huge-integer",
         ["data", "ingest", "--adapter", "chitchat", "--input", "{d}/chat.json", "--output", "{d}/o.jsonl"],
         2, ["{d}/chat.json: malformed JSON: an integer of 5000 digits"],
         {"chat.json": b'{"d1": ' + b"7" * 5000 + b"}"}, absent=("o.jsonl",)),
    Case("ingest-rejects-is-output",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs.jsonl", "--output", "{d}/x.jsonl",
          "--rejects", "{d}/x.jsonl"],
         2, ["{d}/x.jsonl", "same file as output"],
         {"logs.jsonl": jsonl(line(msg("hi", "hello"))), "x.jsonl": b"earlier output\n"},
         untouched=("logs.jsonl", "x.jsonl")),
    Case("ingest-output-is-input",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs.jsonl", "--output", "{d}/logs.jsonl"],
         2, ["{d}/logs.jsonl", "same file as output"], {"logs.jsonl": jsonl(line(msg("hi", "hello")))},
         untouched=("logs.jsonl",)),
    Case("ingest-output-inside-input-folder",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs", "--output", "{d}/logs/out.jsonl",
          "--rejects", "{d}/rejects.jsonl"],
         2, ["{d}/logs/out.jsonl", "inside input folder"], {"logs/a.jsonl": jsonl(line(msg("hi", "hello")))},
         absent=("logs/out.jsonl", "rejects.jsonl")),
    Case("ingest-output-is-folder",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs.jsonl", "--output", "{d}/folder"],
         2, ["{d}/folder", "is a folder"], {"logs.jsonl": jsonl(line(msg("hi", "hello"))), "folder": "dir"}),
    Case("ingest-max-bad-share-above-one",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs.jsonl", "--output", "{d}/o.jsonl",
          "--max-bad-share", "1.5"],
         2, ["--max-bad-share"], {"logs.jsonl": jsonl(line(msg("hi", "hello")))}, absent=("o.jsonl",)),
    Case("ingest-list-id-is-rejected-not-stringified",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs.jsonl", "--output", "{d}/o.jsonl",
          "--rejects", "{d}/r.jsonl", "--max-bad-share", "1"],
         0, ["{d}/logs.jsonl:2: id: expected a string or an integer, got a list"],
         {"logs.jsonl": jsonl(line(msg("hi", "hello", id="a")), line(msg("hi", "hello", id=[1, 2])))},
         account=("ingest", "logs.jsonl", "o.jsonl", "r.jsonl")),
    Case("ingest-dict-source-is-rejected",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs.jsonl", "--output", "{d}/o.jsonl",
          "--rejects", "{d}/r.jsonl", "--max-bad-share", "1"],
         0, ["{d}/logs.jsonl:1: source: expected a string, got an object"],
         {"logs.jsonl": jsonl(line(msg("hi", "hello", source={"name": "x"})), line(msg("yo", "hey")))},
         account=("ingest", "logs.jsonl", "o.jsonl", "r.jsonl")),
    Case("ingest-unknown-fields-kept-in-meta",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs.jsonl", "--output", "{d}/o.jsonl",
          "--rejects", "{d}/r.jsonl"],
         0, ["wrote 1 conversations"],
         {"logs.jsonl": jsonl(line({"id": 7, "lang": "en", "messages": [
             {"role": "user", "content": "hi", "timestamp": 1}, {"role": "assistant", "content": "hello"}]}))},
         account=("ingest", "logs.jsonl", "o.jsonl", "r.jsonl"), check=lambda d: _kept_meta(d)),
    Case("ingest-invalid-utf8-line",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs.jsonl", "--output", "{d}/o.jsonl",
          "--rejects", "{d}/r.jsonl", "--max-bad-share", "0.5"],
         0, ["{d}/logs.jsonl:1: not UTF-8 at byte"],
         {"logs.jsonl": jsonl(line(msg("caf\u00e9", "ok")).replace(b"\xc3\xa9", b"\xe9"), line(msg("yo", "hey")))},
         account=("ingest", "logs.jsonl", "o.jsonl", "r.jsonl")),
    Case("ingest-document-with-lone-surrogate",
         ["data", "ingest", "--adapter", "chitchat", "--input", "{d}/chat.json", "--output", "{d}/o.jsonl",
          "--rejects", "{d}/r.jsonl", "--max-bad-share", "1"],
         0, ["{d}/chat.json:1: d1 (view a): lone surrogate \\ud800", "wrote 2 conversations (1 dialogues)"],
         {"chat.json": json.dumps({f"d{i}": {"messages": [[{"text": text, "sender": "a", "timestamp": 1}],
                                                         [{"text": "yo", "sender": "b", "timestamp": 2}]]}
                                   for i, text in ((1, "hi \ud800"), (2, "hello"))}).encode()},
         check=lambda d: _lines_in(d / "r.jsonl", 2)),
    Case("ingest-too-many-bad-exits-1",
         ["data", "ingest", "--adapter", "messages", "--input", "{d}/logs.jsonl", "--output", "{d}/o.jsonl",
          "--rejects", "{d}/r.jsonl"],
         1, ["{d}/logs.jsonl:2: messages[1].role: unknown role 'narrator'", "max_bad_share"],
         {"logs.jsonl": jsonl(line(msg("hi", "hello")), line({"messages": [
             {"role": "user", "content": "a"}, {"role": "narrator", "content": "b"}]}))},
         account=("ingest", "logs.jsonl", "o.jsonl", "r.jsonl")),
    # ---- label (rules labeler: no model) ---------------------------------------------------------
    Case("label-quarantine-is-output",
         ["label", "--backend", "rules", "--input", "{d}/in.jsonl", "--output", "{d}/x.jsonl",
          "--quarantine", "{d}/x.jsonl"],
         2, ["{d}/x.jsonl", "--quarantine is the same file as --output"], {"in.jsonl": GOOD_FILE},
         untouched=("in.jsonl",), absent=("x.jsonl",)),
    Case("label-output-symlink-to-input",
         ["label", "--backend", "rules", "--input", "{d}/in.jsonl", "--output", "{d}/out.jsonl"],
         2, ["{d}/out.jsonl", "--output is the same file as --input"],
         {"in.jsonl": GOOD_FILE, "out.jsonl": "link:in.jsonl"}, untouched=("in.jsonl",)),
    Case("label-input-is-folder",
         ["label", "--backend", "rules", "--input", "{d}/folder", "--output", "{d}/o.jsonl"],
         2, ["{d}/folder", "is a folder"], {"folder": "dir"}, absent=("o.jsonl",)),
    Case("label-output-under-a-file",
         ["label", "--backend", "rules", "--input", "{d}/in.jsonl", "--output", "{d}/in.jsonl/o.jsonl"],
         2, ["{d}/in.jsonl/o.jsonl", "is a file, not a folder"], {"in.jsonl": GOOD_FILE}, untouched=("in.jsonl",)),
    Case("label-params-with-a-typo",
         ["label", "--params", "{d}/p.yaml", "--input", "{d}/in.jsonl", "--output", "{d}/o.jsonl"],
         2, ["{d}/p.yaml: label.backend: Input should be 'rules', 'embedding', 'llm' or 'ensemble' (got 'rulez')"],
         {"in.jsonl": GOOD_FILE, "p.yaml": b"profile: demo\nprofiles: {demo: {}}\nlabel: {backend: rulez}\n"},
         absent=("o.jsonl",)),
    Case("label-max-bad-share-above-one",
         ["label", "--backend", "rules", "--input", "{d}/in.jsonl", "--output", "{d}/o.jsonl",
          "--quarantine", "{d}/q.jsonl", "--max-bad-share", "2"],
         2, ["--max-bad-share"], {"in.jsonl": GOOD_FILE}, absent=("o.jsonl", "q.jsonl")),
    Case("label-bad-records-quarantined-and-counted",
         ["label", "--backend", "rules", "--input", "{d}/in.jsonl", "--output", "{d}/o.jsonl",
          "--quarantine", "{d}/q.jsonl", "--max-bad-share", "0.5"],
         0, ["labelled 3 user turns in 3 conversations", "1 quarantined -> {d}/q.jsonl"],
         {"in.jsonl": jsonl(*GOOD, line(conv("r", "a", "b")).replace(b'"assistant"', b'"robot"'))},
         account=("label", "in.jsonl", "o.jsonl", "q.jsonl")),
    # ---- sim eval: input checks, all before a model is loaded ------------------------------------
    Case("sim-eval-bad-share-refused-before-loading",
         ["sim", "eval", "--model", "{d}/no-model", "--data", "{d}/held.jsonl", "--out", "{d}/rep"],
         1, ["{d}/held.jsonl: 51 of 52 records are bad", "{d}/held.jsonl:1: malformed JSON"],
         {"held.jsonl": jsonl(*[b"{not json"] * 51, GOOD[0])}, absent=("rep",)),
    Case("sim-eval-data-is-folder",
         ["sim", "eval", "--model", "{d}/no-model", "--data", "{d}/folder", "--out", "{d}/rep"],
         2, ["{d}/folder: --data is a folder"], {"folder": "dir"}, absent=("rep",)),
    Case("sim-eval-data-missing",
         ["sim", "eval", "--model", "{d}/no-model", "--data", "{d}/nope.jsonl", "--out", "{d}/rep"],
         2, ["{d}/nope.jsonl: file not found (--data)"], absent=("rep",)),
    Case("sim-eval-out-is-a-file",
         ["sim", "eval", "--model", "{d}/no-model", "--data", "{d}/held.jsonl", "--out", "{d}/held.jsonl"],
         2, ["{d}/held.jsonl: --out is a file, not a folder"], {"held.jsonl": GOOD_FILE}, untouched=("held.jsonl",)),
    Case("sim-eval-max-bad-share-out-of-range",
         ["sim", "eval", "--model", "{d}/no-model", "--data", "{d}/held.jsonl", "--max-bad-share", "-1"],
         2, ["--max-bad-share"], {"held.jsonl": GOOD_FILE}),
    # ---- envs rollout: --out checked before any dialogue -----------------------------------------
    Case("envs-rollout-out-is-folder",
         ["envs", "rollout", "--env", "shopping", "-n", "1", "--out", "{d}/folder"],
         2, ["{d}/folder: --out is a folder"], {"folder": "dir"}),
    Case("envs-rollout-missing-learned-user",
         ["envs", "rollout", "--env", "shopping", "--user", "learned:/nonexistent", "-n", "1", "--out", "{d}/t.jsonl"],
         2, ["model spec '/nonexistent': no such folder"], absent=("t.jsonl",)),
    Case("envs-rollout-out-under-a-file",
         ["envs", "rollout", "--env", "shopping", "-n", "1", "--out", "{d}/f.txt/t.jsonl"],
         2, ["{d}/f.txt/t.jsonl", "is a file, not a folder"], {"f.txt": b"x"}, untouched=("f.txt",)),
    # ---- stages (the stage runner, one MLflow run each) ------------------------------------------
    Case("stage-ingest-rejects-is-output", [], 1, ["same file as output"],
         {"logs.jsonl": jsonl(line(msg("hi", "hello")))}, untouched=("logs.jsonl",), absent=("out.jsonl",),
         stage="ingest"),
    Case("stage-ingest-max-bad-share-percent", [], 2, ["ingest.max_bad_share: Input should be less than or equal to 1"],
         {"logs.jsonl": jsonl(line(msg("hi", "hello")))}, absent=("out.jsonl",), stage="ingest-share"),
    Case("stage-validate-output-is-input", [], 1, ["{d}/in.jsonl", "output is the same file as input"],
         {"in.jsonl": GOOD_FILE}, untouched=("in.jsonl",), stage="validate"),
    Case("stage-validate-max-bad-share-negative", [], 2, ["validate.max_bad_share: Input should be greater than or equal to 0"],
         {"in.jsonl": GOOD_FILE}, untouched=("in.jsonl",), stage="validate-share"),
    Case("stage-split-input-inside-output-dir", [], 1, ["{d}/splits/all.jsonl", "inside split.output_dir"],
         {"splits/all.jsonl": GOOD_FILE}, untouched=("splits/all.jsonl",), stage="split"),
    Case("stage-split-fraction-typo", [], 2, ["split.fractions.tset: unknown key"],
         {"in.jsonl": GOOD_FILE}, absent=("splits",), stage="split-typo"),
    Case("stage-seed-not-an-integer", [], 2, ["seed: Input should be a valid integer (got 12.7)"],
         {"in.jsonl": GOOD_FILE}, absent=("splits",), stage="split-seed"),
    Case("stage-params-yaml-syntax-error", [], 2, ["YAML syntax error"],
         {"in.jsonl": GOOD_FILE}, absent=("splits",), stage="split-yaml"),
]


def _valid_ids(d: Path, expected: list[str]) -> None:
    assert [json.loads(x)["conversation_id"] for x in records((d / "v.jsonl").read_bytes())] == expected


def _lines_in(path: Path, n: int) -> None:
    assert len(records(path.read_bytes())) == n


def _same_bytes(a: Path, b: Path) -> None:
    assert a.read_bytes() == b.read_bytes()


def _kept_meta(d: Path) -> None:
    [record] = [json.loads(x) for x in records((d / "o.jsonl").read_bytes())]
    assert record["conversation_id"] == "7" and record["meta"] == {"lang": "en"}
    assert record["turns"][0]["meta"] == {"timestamp": 1}


def _written_through(d: Path) -> None:
    assert (d / "v.jsonl").is_symlink() and (d / "real.jsonl").read_bytes() == GOOD_FILE


def _no_pii_left(d: Path) -> None:
    text = (d / "v.jsonl").read_text()
    assert "a@b.org" not in text and "7946 0958" not in text and "[EMAIL]" in text and "[PHONE]" in text


def _image_kept(d: Path) -> None:
    [record] = [json.loads(x) for x in records((d / "o.jsonl").read_bytes())]
    assert record["turns"][0]["content"] == "what is it?\n[image]"
    assert record["turns"][0]["meta"]["non_text_parts"][0]["part"]["image_url"]["url"] == "https://x/cat.png"


def _redacted(d: Path) -> None:
    valid = [json.loads(x) for x in records((d / "v.jsonl").read_bytes())]
    assert valid[1]["turns"][0]["content"] == "card [CARD], call [PHONE]"
    assert records((d / "v.jsonl").read_bytes())[0] == GOOD[0]  # untouched records pass unchanged
    report = (d / "rep" / "gx_validation_result.json").read_text()
    # the numbers as written (with their spaces): the report's timestamps and hashes hold digit runs too
    assert "4111 1111" not in report and "7946 0958" not in report


def _stage_params(d: Path, kind: str) -> Path:
    ingest = {"sources": [{"adapter": "messages", "input": str(d / "logs.jsonl")}], "limit_per_source": None,
              "output": str(d / "out.jsonl"), "rejects": str(d / "rej.jsonl"), "max_bad_share": 0.05}
    validate = {"input": str(d / "in.jsonl"), "output": str(d / "v.jsonl"), "quarantine": str(d / "q.jsonl"),
                "report_dir": None, "max_bad_share": 0.05}
    split = {"input": str(d / "splits/all.jsonl"), "output_dir": str(d / "splits"),
             "fractions": {"train": 0.8, "val": 0.1, "test": 0.1}}
    if kind == "ingest":
        ingest["rejects"] = ingest["output"]
    if kind == "ingest-share":
        ingest["max_bad_share"] = 5
    if kind == "validate":
        validate["output"] = validate["input"]
    if kind == "validate-share":
        validate["max_bad_share"] = -0.1
    if kind == "split-typo":
        split["fractions"] = {"train": 0.8, "val": 0.1, "tset": 0.1}
    params = {"profile": "t", "seed": 12.7 if kind == "split-seed" else 0, "profiles": {"t": {}},
              "ingest": ingest, "validate": validate, "split": split}
    path = d / "params.yaml"
    path.write_text(yaml.safe_dump(params) + ("split: [unclosed\n" if kind == "split-yaml" else ""))
    return path


def _run_stage(d: Path, kind: str) -> tuple[int, str]:
    """The stage as DVC runs it: exit 1 with the exception's message when it raises; a params file
    the check refuses exits 2 with its message on stderr."""
    import contextlib
    import importlib
    import io

    from tasks._runner import main

    module = importlib.import_module(f"tasks.{kind.split('-')[0]}")
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            main(module.STAGE, module.run, module.inputs, argv=["--params", str(_stage_params(d, kind))])
    except SystemExit as exc:
        return int(exc.code or 0), err.getvalue()
    except Exception as exc:  # noqa: BLE001 - the process would exit 1 with this message
        return 1, f"{type(exc).__name__}: {exc}"
    return 0, ""


@pytest.fixture(scope="module")
def stage_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One MLflow store for all stage rows: creating a sqlite store costs seconds, a run does not."""
    return f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=[pytest.mark.integration] if c.stage else [])
                                  for c in CASES])  # stage rows open an MLflow store
def test_bad_input(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stage_store: str) -> None:
    if case.skip_root and ROOT_USER:
        pytest.skip("root reads and writes regardless of permission bits")
    if case.stage:
        import mlflow

        monkeypatch.setenv("MLFLOW_TRACKING_URI", stage_store)
        mlflow.set_tracking_uri(stage_store)
    d = tmp_path / "case"
    d.mkdir()
    monkeypatch.chdir(d)
    _make(d, case.files)
    before = {name: (d / name).read_bytes() for name in case.untouched}
    try:
        if case.stage:
            code, output = _run_stage(d, case.stage)
        else:
            result = runner.invoke(app, [a.replace("{d}", str(d)) for a in case.argv])
            code, output = result.exit_code, result.output
            assert result.exception is None or isinstance(result.exception, SystemExit), output
    finally:
        for path in d.rglob("*"):
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
    assert code == case.code, output
    assert "Traceback" not in output
    for text in case.says:
        assert text.replace("{d}", str(d)) in output, output
    for name, data in before.items():
        assert (d / name).read_bytes() == data, f"{name} was changed"
    for name in case.absent:
        assert not (d / name).exists(), f"{name} was written"
    if case.account:
        check_accounting(d, *case.account)
    if case.check:
        case.check(d)


def test_the_table_is_wide_enough() -> None:
    commands = {"stage" if c.stage else " ".join(a for a in c.argv[:2] if not a.startswith("-")) for c in CASES}
    assert len(CASES) >= 30
    assert {"data validate", "data ingest", "sim eval", "envs rollout", "stage"} <= commands
    assert any(c.argv[:1] == ["label"] for c in CASES)


def test_no_jsonl_reader_replaces_bad_bytes() -> None:
    """No code path opens JSONL with errors="replace" (it turned bad bytes into U+FFFD silently)."""
    root = Path(__file__).resolve().parents[2]
    offenders = [str(p.relative_to(root)) for folder in ("src", "tasks", "flows")
                 for p in (root / folder).rglob("*.py")
                 if 'errors="replace"' in p.read_text() or "errors='replace'" in p.read_text()]
    assert offenders == []


# ---- every command that takes a data path: a bad path is one line and exit 2 --------------------
PATH_OPTIONS = {"--input": "in", "--data": "in", "--gold": "in", "--params": "in",
                "--output": "out", "--quarantine": "out", "--rejects": "out", "--out": "out",
                "--report-dir": "dir"}
DIR_OPTIONS = {("sim eval", "--out")}  # a folder there, a file elsewhere
MODEL_COMMANDS = {"serve", "sim chat", "export"}  # export: a model folder/URI and an output folder (arguments)  # their paths are model folders, the simulator runtime's to check
NO_PATH_COMMANDS = {"run", "stage", "info", "envs list", "envs panel"}
# Registry and local-server commands: their arguments are model URIs and run folders, checked in
# tests/integration/test_lineage.py and test_servers.py.
REGISTRY_COMMANDS = {"lineage", "infra up", "infra down", "infra status"}
FILLERS = {"--adapter": "messages", "--model": "{d}/no-model", "--env": "shopping", "--backend": "rules",
           "--labeler": "rules", "-n": "1"}
REPO_PARAMS = Path(__file__).resolve().parents[2] / "params.yaml"


def _commands() -> dict[str, list[str]]:
    """Every leaf command (and group with its own action) -> the options it takes."""
    import typer.main

    found: dict[str, list[str]] = {}

    def walk(command: object, path: tuple[str, ...]) -> None:
        subs = getattr(command, "commands", None)
        if subs is None or (path and getattr(command, "invoke_without_command", False)):
            found[" ".join(path)] = [p.opts[0] for p in command.params if p.param_type_name == "option"]
        for name, sub in (subs or {}).items():
            walk(sub, (*path, name))

    walk(typer.main.get_command(app), ())
    return found


COMMANDS = _commands()
PATH_CASES = [(name, opt) for name, opts in COMMANDS.items() if name not in MODEL_COMMANDS
              for opt in opts if opt in PATH_OPTIONS]


def test_the_walk_covers_every_command() -> None:
    with_paths = {name for name, _ in PATH_CASES}
    assert with_paths == {"data ingest", "data validate", "label", "label eval", "sim eval", "envs rollout",
                          "params check", "params resolve"}
    assert set(COMMANDS) == with_paths | MODEL_COMMANDS | NO_PATH_COMMANDS | REGISTRY_COMMANDS, \
        "a new command: add it here"


@pytest.mark.parametrize(("command", "option"), PATH_CASES, ids=[f"{c}{o}" for c, o in PATH_CASES])
def test_every_path_option_fails_in_one_line(command: str, option: str, tmp_path: Path) -> None:
    d = tmp_path
    (d / "in.jsonl").write_bytes(GOOD_FILE)
    (d / "folder").mkdir()
    (d / "a-file").write_bytes(b"x")

    def kind(opt: str) -> str:
        return "dir" if (command, opt) in DIR_OPTIONS else PATH_OPTIONS[opt]

    good = {"in": str(d / "in.jsonl"), "out": str(d / "out-{}.jsonl"), "dir": str(d / "dir-{}")}
    args = command.split()
    for opt in COMMANDS[command]:
        if opt in PATH_OPTIONS:
            value = str(REPO_PARAMS) if opt == "--params" else good[kind(opt)].format(opt.strip("-"))
            args += [opt, value]
        elif opt in FILLERS:
            args += [opt, FILLERS[opt].replace("{d}", str(d))]
    bad = {"in": str(d / "folder"), "out": str(d / "a-file" / "x.jsonl"), "dir": str(d / "a-file")}[kind(option)]
    args[args.index(option) + 1] = bad
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    assert bad in result.output and ("folder" in result.output or "file" in result.output), result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
