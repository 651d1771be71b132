"""The exit-status table: each error class's status and code, and the docs that list them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hilltop import errors
from hilltop.cli import exitcodes
from hilltop.cli.exitcodes import ExitStatus, outcome_of

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize(("error", "status", "code"), [
    (errors.WrongCodeError(), ExitStatus.WRONG_CODE, "wrong_code"),
    (errors.WrongCodeOnLan("4"), ExitStatus.WRONG_CODE, "wrong_code"),
    (errors.PeerRejectedError("they said no"), ExitStatus.PEER_REJECTED, "peer_rejected"),
    (errors.RejectedError("transfer rejected"), ExitStatus.DECLINED, "declined"),
    (errors.UnsafeOfferError("entry '../x'"), ExitStatus.DECLINED, "declined"),
    (errors.ProtocolError("garbage"), ExitStatus.FAILED, "protocol_error"),
    (errors.CodeFormatError("bad"), ExitStatus.USAGE, "bad_code"),
    (errors.TransferError("broke"), ExitStatus.FAILED, "transfer_failed"),
    (errors.TransitError("none"), ExitStatus.FAILED, "transit_failed"),
    (errors.DialError("none"), ExitStatus.FAILED, "transit_failed"),
    (errors.ServerUnreachableError("x"), ExitStatus.FAILED, "server_unreachable"),
    (errors.BadRecordError("x"), ExitStatus.FAILED, "protocol_error"),
    (errors.HilltopError("x"), ExitStatus.FAILED, "failed"),
    (KeyError("a bug"), ExitStatus.FAILED, "bug"),
])
def test_each_error_has_its_status_and_code(error: BaseException, status: ExitStatus,
                                            code: str) -> None:
    assert outcome_of(error) == exitcodes.Outcome(status, code)


def error_classes() -> list[type[BaseException]]:
    return [c for c in vars(errors).values()
            if isinstance(c, type) and issubclass(c, errors.HilltopError)]


@pytest.mark.parametrize("cls", error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_gets_a_known_code(cls: type[BaseException]) -> None:
    outcome = outcome_of(cls.__new__(cls))
    assert outcome != exitcodes.BUG
    assert outcome.code in exitcodes.all_codes()


@pytest.mark.parametrize("doc", ["README.md", "docs/json-events.md"])
def test_the_docs_list_every_status(doc: str) -> None:
    text = (ROOT / doc).read_text()
    for status in ExitStatus:
        assert re.search(rf"^\| {int(status)} \|", text, re.MULTILINE), \
            f"{doc} has no row for exit status {int(status)}"


def test_the_json_doc_lists_every_code() -> None:
    text = (ROOT / "docs" / "json-events.md").read_text()
    for code in exitcodes.all_codes():
        assert f"`{code}`" in text
