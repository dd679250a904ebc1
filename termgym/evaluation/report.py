"""``termgym view``: a run as one static HTML file a person opens in a browser.

The page holds the summary, a reward histogram (inline SVG), a per-task table and every episode's
transcript (system prompt, task prompt, each assistant message with its command, the command's
exit code and output, step rewards and reward events, the grade, errors). It needs nothing
outside the file: styles and the small filtering script are inline, and every piece of run data is
HTML-escaped text (never code), so a transcript cannot inject script into the page.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from termgym.encodable import JSON_ERRORS
from termgym.evaluation.results import EpisodeResult, RunDir, _duration, _si, summarize

_CSS = """
:root { --ok:#1a7f37; --bad:#cf222e; --warn:#9a6700; --muted:#57606a; --line:#d0d7de; --bg:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0; color: #1f2328; }
header { padding: 16px 24px; background: #24292f; color: #fff; }
header h1 { margin: 0 0 4px; font-size: 20px; }
header .sub { color: #c9d1d9; font-size: 13px; }
main { padding: 16px 24px; max-width: 1200px; }
h2 { font-size: 16px; margin: 24px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; min-width: 130px; background: var(--bg); }
.card .v { font-size: 20px; font-weight: 600; }
.card .k { color: var(--muted); font-size: 12px; }
table { border-collapse: collapse; }
td, th { border-bottom: 1px solid var(--line); padding: 3px 10px; text-align: left; font-variant-numeric: tabular-nums; }
th { background: var(--bg); }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px; color: #fff; }
.passed { background: var(--ok); } .failed { background: var(--bad); }
.agent_error { background: var(--warn); } .infra_error { background: #6e7781; }
.controls { margin: 8px 0; display: flex; gap: 8px; align-items: center; flex-wrap: wrap; }
details.episode { border: 1px solid var(--line); border-radius: 6px; margin: 6px 0; }
details.episode > summary { padding: 6px 10px; cursor: pointer; background: var(--bg); }
details.episode[open] > summary { border-bottom: 1px solid var(--line); }
.ep-body { padding: 8px 12px; }
.msg { border-left: 3px solid var(--line); margin: 8px 0; padding: 2px 10px; }
.msg .role { font-size: 12px; font-weight: 600; color: var(--muted); text-transform: uppercase; }
.msg.assistant { border-color: #0969da; } .msg.user, .msg.tool { border-color: #8250df; }
.msg.system { border-color: #afb8c1; }
pre { white-space: pre-wrap; word-break: break-word; background: var(--bg); padding: 6px 8px; margin: 4px 0;
      border-radius: 4px; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, monospace; max-height: 480px; overflow: auto; }
.meta { color: var(--muted); font-size: 12px; }
.error { color: var(--bad); }
.hidden { display: none; }
svg text { font: 11px system-ui, sans-serif; fill: #1f2328; }
"""

_JS = """
(function () {
  var episodes = Array.prototype.slice.call(document.querySelectorAll('details.episode'));
  var filter = document.getElementById('filter');
  var search = document.getElementById('search');
  var shown = document.getElementById('shown-count');
  function apply() {
    var f = filter.value, q = search.value.toLowerCase(), n = 0;
    episodes.forEach(function (ep) {
      var ok = (f === 'all' || ep.dataset.outcome === f) &&
               (!q || ep.dataset.task.toLowerCase().indexOf(q) !== -1);
      ep.classList.toggle('hidden', !ok);
      if (ok) { n += 1; }
    });
    shown.textContent = String(n);
  }
  filter.addEventListener('change', apply);
  search.addEventListener('input', apply);
  document.getElementById('expand').addEventListener('click', function () {
    episodes.forEach(function (ep) { if (!ep.classList.contains('hidden')) { ep.open = true; } });
  });
  document.getElementById('collapse').addEventListener('click', function () {
    episodes.forEach(function (ep) { ep.open = false; });
  });
  // ?show=failed&q=ledgerly&open=ep-x__a0 preselects the filter and opens episodes: views can be shared as links.
  var params = new URLSearchParams(location.search);
  if (params.get('show')) { filter.value = params.get('show'); }
  if (params.get('q')) { search.value = params.get('q'); }
  (params.get('open') || '').split(',').forEach(function (id) {
    var ep = id && document.getElementById(id);
    if (ep && ep.tagName === 'DETAILS') { ep.open = true; }
  });
  if (location.hash) {
    var target = document.getElementById(location.hash.slice(1));
    if (target && target.tagName === 'DETAILS') { target.open = true; }
  }
  apply();
  document.body.setAttribute('data-ready', '1');
})();
"""


def write_report(run: str | Path, output: str | Path | None = None) -> Path:
    """Write the HTML report of the run directory ``run`` (default ``run/report.html``); returns its path."""
    store = RunDir(run)
    config = store.read_config()
    results = store.episodes()
    summary = summarize(results, config)
    path = Path(output) if output is not None else store.path / "report.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    transcripts = {r.key: store.transcript(r) for r in results}  # reads each episode's record
    path.write_text(render_report(summary, results, config, title=str(store.path), transcripts=transcripts),
                    encoding="utf-8", errors=JSON_ERRORS)
    return path


def render_report(summary: dict[str, Any], results: list[EpisodeResult], config: dict[str, Any],
                  title: str = "run", transcripts: dict[tuple[str, int], dict[str, Any] | None] | None = None) -> str:
    """The report page as a string (see the module docstring).

    ``transcripts`` maps each result's ``key`` to its transcript (:meth:`RunDir.transcript`, read
    from the episode's record); an episode without one shows no transcript.
    """
    transcripts = transcripts or {}
    e = html.escape
    who = summary.get("agent") or "?"
    if summary.get("model"):
        who += f" · {summary['model']}"
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>termgym eval · {e(str(summary.get('env_id')))} · {e(who)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<header><h1>{e(str(summary.get('env_id')))} — {e(who)}</h1>",
        f'<div class="sub">run {e(title)} · {summary["episodes"]} episodes · updated '
        f"{e(str(config.get('updated_at', '')))}</div></header><main>",
        "<h2>Summary</h2>", _cards(summary),
        "<h2>Score histogram</h2>", histogram_svg([r.score for r in results if r.scored]),
        "<h2>Tasks</h2>", _task_table(summary, results),
        "<h2>Episodes</h2>",
        '<div class="controls"><label>show <select id="filter">'
        '<option value="all">all</option><option value="passed">passed</option>'
        '<option value="failed">failed</option><option value="agent_error">agent errors</option>'
        '<option value="infra_error">infra errors</option></select></label>'
        '<input id="search" type="search" placeholder="task id…">'
        '<button id="expand" type="button">expand shown</button>'
        '<button id="collapse" type="button">collapse all</button>'
        f'<span class="meta"><span id="shown-count">{len(results)}</span> of {len(results)} shown</span></div>',
        '<div id="episodes">',
    ]
    parts += [_episode(r, transcripts.get(r.key)) for r in results]
    parts += ["</div>", "<h2>Configuration</h2>",
              f"<pre>{e(json.dumps(config, indent=2, ensure_ascii=False))}</pre>",
              f"</main><script>{_JS}</script></body></html>"]
    return "\n".join(parts)


def histogram_svg(scores: list[float], bins: int = 10, width: int = 560, height: int = 180) -> str:
    """An inline SVG bar chart of ``scores`` over ``[0, 1]`` in ``bins`` equal bins (1.0 in the last)."""
    counts = [0] * bins
    for score in scores:
        counts[min(bins - 1, max(0, int(score * bins)))] += 1
    top = max(counts) or 1
    pad_l, pad_b, pad_t = 34, 26, 14
    plot_w, plot_h = width - pad_l - 16, height - pad_b - pad_t
    bar_w = plot_w / bins
    out = [f'<svg id="histogram" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'role="img" aria-label="score histogram of {len(scores)} episodes">',
           f'<line x1="{pad_l}" y1="{pad_t + plot_h}" x2="{pad_l + plot_w}" y2="{pad_t + plot_h}" stroke="#57606a"/>',
           f'<text x="4" y="{pad_t + 4}">{top}</text><text x="4" y="{pad_t + plot_h}">0</text>']
    for i, count in enumerate(counts):
        h = plot_h * count / top
        x = pad_l + i * bar_w
        colour = "#1a7f37" if i == bins - 1 else "#0969da"
        lo, hi = i / bins, (i + 1) / bins
        out.append(f'<rect class="bar" x="{x + 2:.1f}" y="{pad_t + plot_h - h:.1f}" width="{bar_w - 4:.1f}" '
                   f'height="{h:.1f}" fill="{colour}" data-count="{count}"><title>{lo:.1f}–{hi:.1f}: {count}'
                   f"</title></rect>")
        if count:
            out.append(f'<text x="{x + bar_w / 2:.1f}" y="{pad_t + plot_h - h - 3:.1f}" text-anchor="middle">'
                       f"{count}</text>")
        out.append(f'<text x="{x:.1f}" y="{height - 8}" text-anchor="middle">{lo:.1f}</text>')
    out.append(f'<text x="{pad_l + plot_w:.1f}" y="{height - 8}" text-anchor="middle">1.0</text>')
    out.append("</svg>")
    return "".join(out)


def _cards(s: dict[str, Any]) -> str:
    def pct(x: float | None) -> str:
        return "–" if x is None else f"{100 * x:.1f}%"

    cards = [
        ("solve rate", pct(s["solve_rate"]), f"{s['solved']}/{s['scored']} scored episodes"),
        ("mean score", "–" if s["mean_score"] is None else f"{s['mean_score']:.3f}", ""),
    ]
    cards += [(f"pass@{k}", pct(v), "unbiased estimator") for k, v in s["pass_at_k"].items()]
    cards += [
        ("episodes", str(s["episodes"]), f"{s['completed']} completed · {s['agent_errors']} agent errors · "
                                         f"{s['infra_errors']} infra errors"),
        ("steps", "–" if s["steps_mean"] is None else f"{s['steps_mean']:.1f}", "mean per episode"),
        ("tokens", _si(s["prompt_tokens"] + s["completion_tokens"]),
         f"{_si(s['prompt_tokens'])} prompt · {_si(s['completion_tokens'])} completion"),
        ("episode time", _duration(s["episode_seconds_mean"]), f"mean · {_duration(s['episode_seconds_total'])} total"),
    ]
    return '<div class="cards" id="summary">' + "".join(
        f'<div class="card"><div class="v">{html.escape(v)}</div><div class="k">{html.escape(k)}</div>'
        f'<div class="meta">{html.escape(note)}</div></div>' for k, v, note in cards) + "</div>"


def _task_table(summary: dict[str, Any], results: list[EpisodeResult]) -> str:
    rows = ["<table><tr><th>task</th><th>scored attempts</th><th>passed</th><th>mean score</th>"
            "<th>infra errors</th><th>episodes</th></tr>"]
    by_task: dict[str, list[EpisodeResult]] = {}
    for r in results:
        by_task.setdefault(r.task_id, []).append(r)
    for row in summary["per_task"]:
        links = " ".join(f'<a href="#{_anchor(r)}">a{r.attempt}</a>' for r in by_task.get(row["task_id"], []))
        mean = "–" if row["mean_score"] is None else f"{row['mean_score']:.3f}"
        rows.append(f"<tr><td>{html.escape(row['task_id'])}</td><td>{row['attempts']}</td><td>{row['passed']}</td>"
                    f"<td>{mean}</td><td>{row['infra_errors']}</td><td>{links}</td></tr>")
    rows.append("</table>")
    return "".join(rows)


def _outcome(r: EpisodeResult) -> str:
    if r.status != "completed":
        return r.status
    return "passed" if r.passed else "failed"


def _anchor(r: EpisodeResult) -> str:
    from termgym.evaluation.results import episode_filename

    return "ep-" + episode_filename(r.task_id, r.attempt)[:-5]


def _episode(r: EpisodeResult, transcript: dict[str, Any] | None) -> str:
    e = html.escape
    outcome = _outcome(r)
    head = (f'<summary><span class="badge {outcome}">{outcome.replace("_", " ")}</span> '
            f"<b>{e(r.task_id)}</b> attempt {r.attempt} · score {r.score:.2f} · {r.steps} steps · "
            f"{_si(r.prompt_tokens + r.completion_tokens)} tokens · {r.wall_time:.1f}s · "
            f"ended by {e(str(r.end_reason or r.status))}</summary>")
    body = ['<div class="ep-body">']
    if r.error:
        body.append(f'<p class="error"><b>{e(r.error.get("kind", ""))} error</b> '
                    f"({e(str(r.error.get('type')))} in {e(str(r.error.get('where', '?')))}): "
                    f"{e(str(r.error.get('message')))}</p>")
    for failure in r.infra_failures:
        body.append(f'<p class="meta">retried after infrastructure failure: {e(str(failure.get("type")))}: '
                    f"{e(str(failure.get('message'))[:500])}</p>")
    if transcript is not None:
        body.append(_transcript(transcript))
    else:
        body.append('<p class="meta">no transcript: the episode failed before it started</p>')
    if r.grade is not None:
        body.append(f"<h4>Grade</h4><pre>{e(json.dumps(r.grade, indent=2, ensure_ascii=False))}</pre>")
    body.append(f'<p class="meta">seed {r.seed} · started {e(str(r.started_at))} on {e(str(r.worker))} · '
                f"agent {r.agent_time:.2f}s · env {r.env_time:.2f}s · total reward {r.total_reward:.3f}</p>")
    body.append("</div>")
    return (f'<details class="episode" id="{_anchor(r)}" data-task="{e(r.task_id)}" data-outcome="{outcome}" '
            f'data-score="{r.score}">' + head + "".join(body) + "</details>")


def _transcript(transcript: dict[str, Any]) -> str:
    e = html.escape
    out = []
    turns = {t.get("step"): t for t in transcript.get("turns") or []}
    step = 0
    for index, message in enumerate(transcript.get("messages") or []):
        role = str(message.get("role", "?"))
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False) if content else ""
        label = {0: "system prompt", 1: "task prompt"}.get(index, role)
        if role == "assistant":
            step += 1
            label = f"assistant · step {step}"
        block = [f'<div class="msg {e(role)}"><div class="role">{e(label)}</div>']
        if text:
            block.append(f"<pre>{e(text)}</pre>")
        for call in message.get("tool_calls") or []:
            fn = call.get("function") or {}
            block.append(f'<pre class="tool-call">→ {e(str(fn.get("name")))}({e(str(fn.get("arguments")))})</pre>')
        if role == "assistant" and step in turns:
            block.append(_turn_meta(turns[step]))
        block.append("</div>")
        if index == 0:  # the system prompt is long and the same everywhere: fold it
            block = [f"<details><summary class=\"meta\">system prompt ({len(text)} chars)</summary>{''.join(block)}"
                     "</details>"]
        out.append("".join(block))
    return "".join(out)


def _turn_meta(turn: dict[str, Any]) -> str:
    e = html.escape
    action = turn.get("action") or {}
    bits = [f"action {e(str(action.get('kind')))}"]
    if action.get("error"):
        bits.append(f'<span class="error">{e(str(action["error"]))}</span>')
    exec_ = turn.get("exec")
    if exec_:
        bits.append(f"exit code {exec_.get('exit_code')}" + (" (timed out)" if exec_.get("timed_out") else ""))
    bits.append(f"reward {float(turn.get('reward', 0.0)):+.3f}")
    usage = turn.get("usage") or {}
    if usage:
        bits.append(f"{usage.get('prompt_tokens', 0)}+{usage.get('completion_tokens', 0)} tokens")
    meta = turn.get("meta") or {}
    if "latency" in meta:
        bits.append(f"{meta['latency']:.2f}s")
    if meta.get("retries"):
        bits.append(f"{meta['retries']} retries")
    out = f'<div class="meta">{" · ".join(bits)}</div>'
    events = turn.get("reward_events")
    if events:
        out += '<div class="meta reward-events">reward events: ' + ", ".join(_event(ev) for ev in events) + "</div>"
    return out


def _event(event: Any) -> str:
    if not isinstance(event, dict):
        return html.escape(str(event))
    name = event.get("event") or event.get("name") or "?"
    text = f"{name} {float(event.get('reward', 0.0)):+.3f}"
    if event.get("capped"):
        text += " (capped)"
    return html.escape(text)
