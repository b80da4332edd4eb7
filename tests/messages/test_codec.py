"""The message catalog and its one JSON wire codec."""

from __future__ import annotations

import gc
import json

import msgspec
import pytest

from messages import (
    Attention,
    Evidence,
    ExitInfo,
    MessageError,
    SessionKey,
    decode_inbound,
    decode_outbound,
    encode,
    revalidate,
)
from messages.codec import INBOUND_TYPES, OUTBOUND_TYPES
from tests.support.examples import INBOUND, OUTBOUND, T


def test_examples_cover_the_whole_catalog() -> None:
    assert {type(m) for m in INBOUND} == set(INBOUND_TYPES)
    assert {type(m) for m in OUTBOUND} == set(OUTBOUND_TYPES)


@pytest.mark.parametrize("message", INBOUND, ids=lambda m: type(m).__name__)
def test_inbound_round_trip(message: msgspec.Struct) -> None:
    data = encode(message)
    assert json.loads(data)["type"] == type(message).__name__
    assert decode_inbound(data) == message
    assert revalidate(message) == message


@pytest.mark.parametrize("message", OUTBOUND, ids=lambda m: type(m).__name__)
def test_outbound_round_trip(message: msgspec.Struct) -> None:
    assert decode_outbound(encode(message)) == message


def test_every_message_is_frozen_and_documented() -> None:
    for cls in (*INBOUND_TYPES, *OUTBOUND_TYPES):
        assert cls.__struct_config__.frozen, cls
        doc = cls.__doc__ or ""
        assert len(doc) > 40, f"{cls.__name__} needs a docstring saying who sends/handles it"


def test_every_message_is_an_untracked_value() -> None:
    """Messages are acyclic values, so the cyclic collector never tracks them (one is made per
    hook on the hot path): built, decoded, revalidated and replaced alike."""
    for cls in (*INBOUND_TYPES, *OUTBOUND_TYPES):
        assert cls.__struct_config__.gc is False, cls
    for key in (SessionKey, Attention, Evidence, ExitInfo):
        assert key.__struct_config__.gc is False, key
    made: list[msgspec.Struct] = []
    for inbound in INBOUND:
        made += (inbound, decode_inbound(encode(inbound)), revalidate(inbound))
    for outbound in OUTBOUND:
        made += (outbound, decode_outbound(encode(outbound)))
    for message in made:
        assert not gc.is_tracked(message), message
        assert not gc.is_tracked(msgspec.structs.replace(message)), message


def _inbound(**fields: object) -> bytes:
    base: dict[str, object] = {"type": "ProcessGone", "pid": 5, "at_ms": T, "observed_at_ms": T}
    base.update(fields)
    return json.dumps(base).encode()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        pytest.param(b'{"type": "ProcessGone", "pid": 5', "malformed JSON", id="truncated"),
        pytest.param(b"\xff\xfe", "malformed JSON", id="invalid-utf8"),
        pytest.param(b"[1, 2]", "Expected `object`", id="not-an-object"),
        pytest.param(
            _inbound(type="NoSuchMessage"), "Invalid value 'NoSuchMessage'", id="unknown-tag"
        ),
        pytest.param(b'{"pid": 5}', "missing required field `type`", id="no-tag"),
        pytest.param(_inbound(pid="5"), "Expected `int`, got `str` - at `$.pid`", id="wrong-type"),
        pytest.param(
            b'{"type": "ProcessGone", "pid": 5, "at_ms": 1795995369045}',
            "missing required field `observed_at_ms`",
            id="missing-field",
        ),
        pytest.param(_inbound(at_ms=1_795_995_369), "at `$.at_ms`", id="seconds-not-ms"),
        pytest.param(_inbound(at_ms=10**15), "at `$.at_ms`", id="absurd-future"),
        pytest.param(_inbound(pid=0), "at `$.pid`", id="pid-zero"),
        pytest.param(_inbound(surprise=1), "unknown field `surprise`", id="unknown-field"),
        pytest.param(
            json.dumps(
                {
                    "type": "RolloutReleased",
                    "key": {"harness": "codex", "session_id": ""},
                    "pid": 1,
                    "at_ms": T,
                    "observed_at_ms": T,
                }
            ).encode(),
            "at `$.key.session_id`",
            id="empty-session-id",
        ),
        pytest.param(
            json.dumps(
                {
                    "type": "RolloutReleased",
                    "key": {"harness": "codex", "session_id": "x" * 257},
                    "pid": 1,
                    "at_ms": T,
                    "observed_at_ms": T,
                }
            ).encode(),
            "at `$.key.session_id`",
            id="enormous-session-id",
        ),
        pytest.param(
            json.dumps(
                {
                    "type": "RolloutReleased",
                    "key": {"harness": "vim", "session_id": "a"},
                    "pid": 1,
                    "at_ms": T,
                    "observed_at_ms": T,
                }
            ).encode(),
            "at `$.key.harness`",
            id="unknown-harness",
        ),
        pytest.param(
            json.dumps(
                {
                    "type": "NotifyHook",
                    "harness": "codex",
                    "payload": "hi",
                    "at_ms": T,
                    "observed_at_ms": T,
                }
            ).encode(),
            "Expected `object`, got `str` - at `$.payload`",
            id="non-object-payload",
        ),
    ],
)
def test_malformed_input_raises_one_specific_error(data: bytes, expected: str) -> None:
    with pytest.raises(MessageError) as info:
        decode_inbound(data)
    assert expected in str(info.value)


def test_revalidate_catches_wrong_types_built_in_python() -> None:
    from messages import ProcessGone

    bad = ProcessGone(pid="12", at_ms=T, observed_at_ms=T)  # type: ignore[arg-type]
    with pytest.raises(MessageError, match=r"Expected `int`, got `str` - at `\$.pid`"):
        revalidate(bad)
    with pytest.raises(MessageError, match="not an inbound paneward message: SessionKey"):
        revalidate(SessionKey("codex", "x"))


def test_deeply_nested_payload_is_rejected_not_crashing() -> None:
    depth = 100_000
    data = (
        (
            b'{"type":"NotifyHook","harness":"codex","at_ms":%d,"observed_at_ms":%d,'
            b'"payload":{"a":' % (T, T)
        )
        + b"[" * depth
        + b"]" * depth
        + b"}}"
    )
    with pytest.raises(MessageError, match=r"nested too deeply"):
        decode_inbound(data)
