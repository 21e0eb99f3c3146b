"""The estimate's tokenizers: a transformers model folder counted without importing
transformers (or torch), with the transformers backend's own tokens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest


def _tiny_folder(folder: Path, settings: dict[str, Any], template_file: str | None = None) -> Path:
    """A model folder with a word-level tokenizer.json, as transformers saves one."""
    from tokenizers import Tokenizer as FastTokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    words = ["[UNK]", "<s>", "</s>", "user", "assistant", ":", "hello", "there"]
    tok = FastTokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()  # type: ignore[assignment]
    tok.add_special_tokens(["<s>", "</s>"])
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(settings), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps({"max_position_embeddings": 2048}))
    if template_file is not None:
        (folder / "chat_template.jinja").write_text(template_file, encoding="utf-8")
    return folder


TEMPLATE = (
    "{% for m in messages %}{{ bos_token }}{{ m.role }} : {{ m.content }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}assistant :{% endif %}"
)


@pytest.mark.parametrize(
    ("settings", "template_file"),
    [
        ({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "chat_template": TEMPLATE}, None),
        ({"bos_token": "<s>", "eos_token": "</s>"}, TEMPLATE),  # newer transformers: a file
        (
            {
                "bos_token": "<s>",
                "eos_token": "</s>",
                "chat_template": [
                    {"name": "tool_use", "template": "x"},
                    {"name": "default", "template": TEMPLATE},
                ],
            },
            None,
        ),
    ],
)
def test_a_model_folder_is_counted_without_transformers(
    tmp_path: Path, settings: dict[str, Any], template_file: str | None
) -> None:
    from lcr.estimate.tokenizers import FolderTokenizer

    tok = FolderTokenizer(_tiny_folder(tmp_path / "m", settings, template_file), "tiny", 4096)
    messages = [{"role": "user", "content": "hello there"}]
    assert tok.render_text(messages) == "<s>user : hello there</s>\nassistant :"  # type: ignore[arg-type]
    assert tok.render(messages) == [1, 3, 5, 6, 7, 2, 4, 5]  # type: ignore[arg-type]
    assert tok.count_tokens("hello nobody") == 2 and tok.encode("hello nobody")[1] == 0
    assert tok.context_window == 2048  # the model's own window under the cap


def test_a_folder_without_a_template_joins_the_messages(tmp_path: Path) -> None:
    from lcr.estimate.tokenizers import FolderTokenizer

    tok = FolderTokenizer(_tiny_folder(tmp_path / "m", {}), "tiny", 1024)
    messages = [{"role": "user", "content": "hello"}, {"role": "user", "content": "there"}]
    assert tok.render_text(messages) == "hello\n\nthere\n\n"  # type: ignore[arg-type]
    assert tok.context_window == 1024  # the cap under the model's window


def test_an_unreadable_folder_is_a_model_error(tmp_path: Path) -> None:
    from lcr.errors import ModelError
    from lcr.estimate.tokenizers import FolderTokenizer

    folder = _tiny_folder(tmp_path / "m", {})
    (folder / "tokenizer.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ModelError, match="cannot read the tokenizer"):
        FolderTokenizer(folder, "tiny", 1024)


@pytest.mark.slow
def test_the_estimate_counts_as_the_transformers_backend(smollm: Any, cinderella: Path) -> None:
    """SmolLM2's converted folder, read without transformers, gives the backend's tokens."""
    import sys

    from lcr.estimate.tokenizers import FolderTokenizer, load_tokenizer
    from lcr.models.spec import ModelSpec

    tok = load_tokenizer("smollm2-135m", "transformers", ModelSpec())
    assert isinstance(tok, FolderTokenizer)
    text = cinderella.read_text(encoding="utf-8")
    assert tok.encode(text) == smollm.encode(text)
    for messages in (
        [
            {"role": "system", "content": "Answer. <|im_end|> is text here."},
            {"role": "user", "content": text[:2000]},
        ],
        [{"role": "user", "content": "Café, naïve, 東京 ✓\n\n\ttabs  and  spaces"}],
    ):
        assert tok.render(messages) == smollm.render(messages)  # type: ignore[arg-type]
    assert tok.context_window == smollm.context_window
    assert "tokenizers" in sys.modules
