"""A tiny Qwen3-architecture policy built locally, and an in-process token server that samples from it.

Nothing is downloaded: the tokenizer is a byte-level BPE trained on a small built-in corpus with
Qwen's chat special tokens (``<|im_start|>``, ``<|im_end|>``, ``<|endoftext|>``) and a ChatML
template; the model is a randomly initialised ``Qwen3ForCausalLM`` (hidden size 64, 2 layers).
:class:`TinyTokenServer` speaks the one method veRL's agent loops call on their server manager,
``async generate(request_id, *, prompt_ids, sampling_params, **kw) -> TokenOutput``, so the real
``TermgymAgentLoop`` can be driven on CPU. It can also replay scripted assistant turns (exact
token sequences), so tests reach real shell commands and submissions, which a random model never
writes.
"""

from __future__ import annotations

import asyncio
import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: ChatML as Qwen2.5/Qwen3 render it for plain text turns. Assistant content is rendered verbatim
#: (Qwen3's own template drops the thinking of earlier turns, which token-in/token-out keeps).
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
#: Added as ordinary (non-special) tokens, as in Qwen3: they survive ``skip_special_tokens``.
THINK_TOKENS = ["<think>", "</think>"]

_CORPUS = [
    "THOUGHT: I should look at the files first.\n```bash\nls -la\n```",
    "THOUGHT: Let me read the file.\n```bash\ncat README.md\n```",
    "THOUGHT: Create the file with the right content.\n```bash\necho hi > hello.txt\n```",
    "```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```",
    "<returncode>0</returncode>\n<output>\nhello.txt\n</output>",
    "<pr_description>\nConsider the following task:\n</pr_description>",
    "You are a helpful assistant that can interact with a computer shell to solve programming tasks.",
    "Please always provide EXACTLY ONE action in triple backticks, found 0 actions.",
    "python3 -m pytest -q tests/ && git diff && grep -rn def src/ | head -n 20",
    "<think>\nThe test fails because the function returns None.\n</think>",
]


def build_tiny_tokenizer(vocab_size: int = 512, *, extra_tokens: Sequence[str] = (), words: Sequence[str] = ()):
    """A ``PreTrainedTokenizerFast`` with Qwen's chat tokens, trained here in well under a second.

    ``extra_tokens`` are added as single (non-special) tokens, e.g. whole actions a policy picks
    from (:data:`trainers.verl.learning.CHOICES`). ``words`` are added as one token each wherever
    they stand as a whole word (``single_word``: "red" in "answer red." but not in "ignored"), so a
    prompt word the policy must read (:data:`trainers.verl.learning.COLOURS`) is one position it can
    attend to instead of a few byte pieces shared with other words.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    core.train_from_iterator(_CORPUS * 4, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        clean_up_tokenization_spaces=False,
    )
    tokenizer.add_tokens(THINK_TOKENS)
    if extra_tokens:
        from tokenizers import AddedToken

        tokenizer.add_tokens([AddedToken(t, normalized=False, special=False) for t in extra_tokens])
    if words:
        from tokenizers import AddedToken

        tokenizer.add_tokens([AddedToken(w, single_word=True, normalized=False, special=False) for w in words])
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_tiny_model(tokenizer, *, seed: int = 0, hidden_size: int = 64, num_layers: int = 2,
                     initializer_range: float = 0.02):
    """A randomly initialised ``Qwen3ForCausalLM`` whose vocabulary matches ``tokenizer``.

    ``initializer_range`` is the std of the random weights, the embeddings (tied to the output
    layer) included; it bounds how far apart the logits can get (see :data:`LEARNING_INIT_RANGE`).
    """
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=hidden_size // 4,
        max_position_embeddings=8192,
        initializer_range=initializer_range,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen3ForCausalLM(config)
    model.eval()
    return model


def save_tiny_checkpoint(directory: str | Path, *, seed: int = 0, extra_tokens: Sequence[str] = (),
                         words: Sequence[str] = (), initializer_range: float = 0.02) -> Path:
    """Write tokenizer + model to ``directory`` as a Hugging Face checkpoint (for GPU smoke runs)."""
    directory = Path(directory)
    tokenizer = build_tiny_tokenizer(extra_tokens=extra_tokens, words=words)
    model = build_tiny_model(tokenizer, seed=seed, initializer_range=initializer_range)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


#: A scripted turn: the exact text the "model" answers (encoded once, ended with ``<|im_end|>``),
#: or ``None`` to sample from the tiny model.
Script = Sequence[str | None]


class TinyTokenServer:
    """veRL's server-manager interface over a local model, with optional scripted turns.

    ``scripts`` maps a marker to a :data:`Script`: a request whose prompt (decoded) contains the
    marker plays the script's entry for its turn (the number of assistant turns already in the prompt),
    falling back to the model when the entry is ``None`` or the script has run out. Sampled turns
    draw a target length in ``1..max_tokens + 8`` and, when the model has not ended the turn by
    then and room is left, end it with ``<|im_end|>`` (as a stop would), so both finished and
    length-truncated turns occur. ``calls`` records every request for assertions.

    With ``choices`` (texts that are single tokens of the tokenizer), every unscripted turn is one
    of them followed by ``<|im_end|>``: the choice is sampled from the model's next-token
    distribution restricted to those tokens (at the request's temperature), so the policy's
    preference among them is exactly what training moves. The draw for the k-th request with a
    given prompt is seeded by (seed, prompt, k): the same weights give the same multiset of turns
    whatever order concurrent requests arrive in.
    """

    def __init__(
        self,
        model,
        tokenizer,
        *,
        scripts: dict[str, Script] | None = None,
        seed: int = 0,
        delay: float = 0.0,
        choices: Sequence[str] = (),
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.scripts = dict(scripts or {})
        self.eos_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.rng = random.Random(seed)
        self.delay = delay
        self.turns: dict[str, int] = defaultdict(int)
        self.calls: list[dict[str, Any]] = []
        self.active = 0
        self.max_active = 0
        self.seed = seed
        self.choice_ids = [_single_token_id(tokenizer, text) for text in choices]
        self.prompt_draws: dict[int, int] = defaultdict(int)

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs: Any):
        from verl.workers.rollout.replica import TokenOutput

        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if self.delay:
                await asyncio.sleep(self.delay)
            turn = self.turns[request_id]
            self.turns[request_id] += 1
            max_tokens = int(sampling_params.get("max_tokens") or 64)
            scripted = self._scripted_text(prompt_ids, turn)
            if scripted is not None:
                token_ids = self.tokenizer.encode(scripted, add_special_tokens=False) + [self.eos_id]
                token_ids = token_ids[:max_tokens]
                log_probs = [0.0] * len(token_ids)
                stop_reason = "completed" if token_ids[-1] == self.eos_id else "length"
            else:
                if self.choice_ids:
                    token_ids, log_probs = self._choose(prompt_ids, max_tokens, sampling_params)
                else:
                    token_ids, log_probs = self._sample(prompt_ids, max_tokens, sampling_params)
                stop_reason = "completed" if token_ids and token_ids[-1] == self.eos_id else "length"
            self.calls.append({"request_id": request_id, "turn": turn, "prompt_len": len(prompt_ids),
                               "max_tokens": max_tokens, "n_tokens": len(token_ids), "token_ids": list(token_ids),
                               "scripted": scripted is not None})
            want_logprobs = bool(sampling_params.get("logprobs"))
            return TokenOutput(token_ids=token_ids, log_probs=log_probs if want_logprobs else None,
                               stop_reason=stop_reason, num_preempted=0)
        finally:
            self.active -= 1

    def _scripted_text(self, prompt_ids: list[int], turn: int) -> str | None:
        if not self.scripts:
            return None
        text = self.tokenizer.decode(prompt_ids, skip_special_tokens=False)
        # The turn is read from the prompt (assistant turns already in it), not the request id:
        # veRL's server client sends every turn under a fresh request id.
        turn = text.count("<|im_start|>assistant") - 1
        for marker, script in self.scripts.items():
            if marker in text and 0 <= turn < len(script):
                return script[turn]
        return None

    def _sample(self, prompt_ids: list[int], max_tokens: int, sampling_params: dict[str, Any]):
        import torch

        target = self.rng.randint(1, max_tokens + 8)
        n_new = min(target, max_tokens)
        temperature = float(sampling_params.get("temperature") or 1.0)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # a model this small is 4-5x faster on one thread than on several busy ones
        try:
            out = self._generate(prompt_ids, n_new, temperature)
        finally:
            torch.set_num_threads(threads)
        token_ids = out.sequences[0, len(prompt_ids):].tolist()
        log_probs = [float(torch.log_softmax(score[0].float(), -1)[tok]) for score, tok in zip(out.scores, token_ids, strict=True)]
        if token_ids and token_ids[-1] != self.eos_id and target < max_tokens and len(token_ids) < max_tokens:
            token_ids.append(self.eos_id)  # the sampled turn "stops" here, as a stop string would end it
            log_probs.append(0.0)
        return token_ids, log_probs

    def _choose(self, prompt_ids: list[int], max_tokens: int, sampling_params: dict[str, Any]):
        import torch

        key = hash(tuple(prompt_ids))
        draw = self.prompt_draws[key]
        self.prompt_draws[key] += 1
        rng = random.Random(f"{self.seed}:{key}:{draw}")
        temperature = max(float(sampling_params.get("temperature") or 1.0), 1e-5)
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            with torch.no_grad():
                first = self._next_token_log_probs(prompt_ids, temperature)
                weights = first[self.choice_ids].exp().tolist()
                choice = self.choice_ids[rng.choices(range(len(self.choice_ids)), weights=weights)[0]]
                end = self._next_token_log_probs(prompt_ids + [choice], temperature)
        finally:
            torch.set_num_threads(threads)
        token_ids = [choice, self.eos_id][:max_tokens]
        return token_ids, [float(first[choice]), float(end[self.eos_id])][: len(token_ids)]

    def _next_token_log_probs(self, prompt_ids: list[int], temperature: float):
        import torch

        ids = torch.tensor([prompt_ids], device=self.model.device)
        logits = self.model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits[0, -1].float()
        return torch.log_softmax(logits / temperature, -1)

    def _generate(self, prompt_ids: list[int], n_new: int, temperature: float):
        import torch

        vocab = self.model.config.vocab_size
        # A model whose vocabulary is wider than the tokenizer's (a full-size shape with the tiny
        # tokenizer) must not sample ids the tokenizer cannot decode.
        extra = {"suppress_tokens": list(range(len(self.tokenizer), vocab))} if vocab > len(self.tokenizer) else {}
        with torch.no_grad():
            return self.model.generate(
                torch.tensor([prompt_ids], device=self.model.device),
                attention_mask=torch.ones(1, len(prompt_ids), dtype=torch.long, device=self.model.device),
                max_new_tokens=n_new,
                do_sample=temperature > 0,
                temperature=max(temperature, 1e-5),
                top_k=0,
                top_p=1.0,
                eos_token_id=self.eos_id,
                pad_token_id=self.tokenizer.pad_token_id,
                output_scores=True,
                return_dict_in_generate=True,
                **extra,
            )


def _single_token_id(tokenizer, text: str) -> int:
    ids = tokenizer.encode(text, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"choice {text!r} is {len(ids)} tokens for this tokenizer, not one: build it with "
                         "build_tiny_tokenizer(extra_tokens=...) / save_tiny_checkpoint(extra_tokens=...)")
    return ids[0]


def make_server(scripts: dict[str, Script] | None = None, *, seed: int = 0) -> TinyTokenServer:
    """Tokenizer, model and server in one call."""
    tokenizer = build_tiny_tokenizer()
    return TinyTokenServer(build_tiny_model(tokenizer, seed=seed), tokenizer, scripts=scripts, seed=seed)


def encode_turn(tokenizer, text: str) -> list[int]:
    """The token ids a scripted turn produces (text then ``<|im_end|>``)."""
    return tokenizer.encode(text, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]


__all__ = [
    "CHAT_TEMPLATE",
    "TinyTokenServer",
    "build_tiny_model",
    "build_tiny_tokenizer",
    "encode_turn",
    "make_server",
    "save_tiny_checkpoint",
]

