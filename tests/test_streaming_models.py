"""Each in-process backend hands on its reply as it decodes it, with the real
SmolLM2-135M: the pieces joined are exactly the reply returned (a stop string and
all), and the reply is the one a call without streaming returns."""

from __future__ import annotations

from typing import Any

import pytest

from lcr.models import loading
from lcr.models.spec import ModelSpec
from lcr.progress import NULL_PROGRESS

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("one_torch_thread")]

COUNT = [{"role": "user", "content": "Count from 1 to 20, separated by commas."}]


@pytest.fixture(scope="module", params=["llamacpp", "transformers"])
def backend_llm(request: pytest.FixtureRequest) -> Any:
    spec = ModelSpec(llm="smollm2-135m", device="cpu")
    return loading.load_llm(spec, NULL_PROGRESS, backend=request.param)


@pytest.mark.parametrize("stop", [(), ("9",)])
def test_streamed_pieces_are_the_reply(backend_llm: Any, stop: tuple[str, ...]) -> None:
    whole = backend_llm.generate(COUNT, max_new_tokens=40, stop=stop)
    pieces: list[str] = []
    streamed = backend_llm.generate(COUNT, max_new_tokens=40, stop=stop, on_text=pieces.append)
    assert streamed.text == whole.text and "3" in whole.text
    assert "".join(pieces) == streamed.text
    assert len(pieces) > 5, pieces  # piece by piece, not the whole at the end
    if stop:
        assert "9" not in "".join(pieces)  # held back, then cut with the reply
