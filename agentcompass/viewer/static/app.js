// AgentCompass viewer: runs list, run page (metrics, categories, task table), task page (attempts, trajectory).
// Every value from a run directory is put into the page as text (never as HTML), after terminal escapes and
// control characters are stripped: trajectories hold arbitrary model and tool output.
"use strict";
(() => {
  const app = document.getElementById("app");
  const crumbs = document.getElementById("crumbs");
  const liveBadge = document.getElementById("live");

  const ANSI = /\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]/g;
  const CTRL = /[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]/g;
  const clean = (v) => String(v).replace(ANSI, "").replace(CTRL, "");
  const enc = encodeURIComponent;

  function h(tag, attrs, ...kids) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
      else if (k === "href") el.setAttribute("href", String(v).startsWith("#/") ? v : "#/");
      else el.setAttribute(k, String(v));
    }
    el.append(...kidsOf(kids));
    return el;
  }

  // DOM's append/replaceChildren would print null as "null": drop empty kids first.
  const kidsOf = (kids) => kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false)
    .map((k) => (k instanceof Node ? k : clean(k)));
  const fill = (el, ...kids) => { el.replaceChildren(...kidsOf(kids)); return el; };

  async function api(path, params) {
    const u = new URL(path, location.origin);
    for (const [k, v] of Object.entries(params || {})) {
      if (v !== undefined && v !== null && v !== "" && v !== false) u.searchParams.set(k, String(v));
    }
    const r = await fetch(u, { cache: "no-store" });
    const body = await r.json().catch(() => ({ error: r.statusText }));
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }

  // ---------------------------------------------------------------- formatting
  const isNum = (v) => typeof v === "number" && isFinite(v);
  const fmtNum = (v, d = 3) => (isNum(v) ? (Number.isInteger(v) ? String(v) : v.toFixed(d)) : "–");
  const fmtPct = (v) => (isNum(v) ? (100 * v).toFixed(1) + "%" : "–");
  const fmtInt = (v) => (isNum(v) ? Math.round(v).toLocaleString("en-US") : "–");
  function fmtSec(v) {
    if (!isNum(v)) return "–";
    if (v < 1) return (v * 1000).toFixed(0) + " ms";
    if (v < 120) return v.toFixed(2) + " s";
    if (v < 7200) return (v / 60).toFixed(1) + " min";
    return (v / 3600).toFixed(1) + " h";
  }
  const fmtDate = (ts) => (isNum(ts) ? new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 19) : "–");
  const badge = (text, kind) => h("span", { class: "badge " + (kind || String(text)).replace(/[^a-z_+-]/gi, "") }, text);

  function setCrumbs(items) {
    fill(crumbs, ...items.flatMap((it, i) => [i ? " / " : "", it.href ? h("a", { href: it.href }, it.text) : h("span", {}, it.text)]));
  }

  function errorBox(err) {
    return h("p", { class: "error", role: "alert" }, "Error: ", err && err.message ? err.message : String(err));
  }

  // ---------------------------------------------------------------- routing
  let gen = 0; // bumps on every navigation; async work of an older page checks it and stops
  const timers = new Set();
  function every(ms, fn) { const t = setInterval(fn, ms); timers.add(t); return t; }
  function stopTimers() { for (const t of timers) clearInterval(t); timers.clear(); fill(liveBadge); }

  function route() {
    stopTimers();
    const my = ++gen;
    const parts = location.hash.replace(/^#\/?/, "").split("/");
    let job;
    if (parts[0] === "run" && parts[1]) job = showRun(my, decodeURIComponent(parts[1]));
    else if (parts[0] === "task" && parts[1] && parts[2]) job = showTask(my, decodeURIComponent(parts[1]), decodeURIComponent(parts[2]));
    else job = showRuns(my);
    job.catch((err) => { if (my === gen) fill(app, errorBox(err)); });
  }
  window.addEventListener("hashchange", route);

  // ---------------------------------------------------------------- runs list
  async function showRuns(my) {
    setCrumbs([{ text: "runs" }]);
    const data = await api("/api/runs");
    if (my !== gen) return;
    const rows = data.runs.map((r) => h("tr", { "data-key": r.key },
      h("td", {}, h("a", { href: "#/run/" + enc(r.key), class: "run-link" }, r.run_id)),
      h("td", {}, r.benchmark || "–"), h("td", {}, r.harness || "–"), h("td", {}, r.model || "–"),
      h("td", {}, r.environment || "–"),
      h("td", {}, badge(r.status), r.live ? badge("live") : null, r.stale ? badge("stale", "stale") : null,
        r.unreadable ? h("div", { class: "error" }, r.unreadable) : null),
      h("td", { class: "num" }, `${fmtInt(r.counts.done)} / ${fmtInt(r.counts.total)}`),
      h("td", { class: "num" }, fmtPct(r.metrics.pass_rate)),
      h("td", { class: "num" }, fmtInt(r.usage.total_tokens)),
      h("td", {}, fmtDate(r.started_at)), h("td", { class: "num" }, fmtSec(r.duration_s))));
    fill(app,
      h("h1", {}, "Runs"), h("p", { class: "muted" }, data.root),
      rows.length ? h("table", { id: "runs", class: "grid" },
        h("thead", {}, h("tr", {}, ["run", "benchmark", "harness", "model", "env", "status", "tasks", "pass rate",
          "tokens", "started (UTC)", "duration"].map((t) => h("th", {}, t)))),
        h("tbody", {}, rows)) : h("p", {}, "No run directories (with run_info.json or summary.json) here."));
    if (data.runs.some((r) => r.live)) {
      fill(liveBadge, badge("live"));
      every(3000, () => { if (my === gen) showRuns(my).catch(() => {}); else stopTimers(); });
    }
  }

  // ---------------------------------------------------------------- run page
  const COLUMNS = [
    ["task_id", "task"], ["category", "category"], ["outcome", "outcome"], ["status", "status"],
    ["score", "score"], ["tries", "tries"], ["steps", "steps"], ["tokens", "tokens"], ["time_s", "time"],
    ["error_kind", "error"], ["flags", "flags"],
  ];
  const NUMERIC = new Set(["score", "tries", "steps", "tokens", "time_s"]);
  const tableState = new Map(); // run key -> filters, sort and page: kept while browsing its tasks

  function cell(key, col, r) {
    switch (col) {
      case "task_id": return h("td", {}, h("a", { href: `#/task/${enc(key)}/${enc(r.task_id)}`, class: "task-link" }, r.task_id));
      case "outcome": return h("td", {}, badge(r.outcome));
      case "score": return h("td", { class: "num" }, fmtNum(r.score));
      case "tries": case "steps": return h("td", { class: "num" }, fmtInt(r[col]));
      case "tokens": return h("td", { class: "num" }, fmtInt(r.tokens));
      case "time_s": return h("td", { class: "num" }, fmtSec(r.time_s));
      case "error_kind": return h("td", { title: r.error || null }, r.error_kind || (r.error ? "error" : ""));
      case "flags": return h("td", {}, r.flags.map((f) => h("span", { class: "chip" }, f)));
      default: return h("td", {}, r[col] ?? "");
    }
  }

  function metricCards(run) {
    const m = run.metrics || {};
    const c = run.counts || {};
    const u = run.usage || {};
    const cards = [];
    const add = (label, value) => cards.push(h("div", { class: "card" }, h("div", { class: "label" }, label), h("div", { class: "value" }, value)));
    for (const [k, v] of Object.entries(m)) {
      if (k === "primary_metric") continue;
      add(k, typeof v === "number" && !Number.isInteger(v) ? fmtNum(v, 4) : String(v));
    }
    add("done / total", `${fmtInt(c.done)} / ${fmtInt(c.total)}`);
    if (c.errors) add("errors", fmtInt(c.errors));
    if (c.retries) add("retries", fmtInt(c.retries));
    if (c.reused) add("reused", fmtInt(c.reused));
    if (u.total_tokens) add("tokens", fmtInt(u.total_tokens));
    if (u.cost) add("cost", "$" + u.cost.toFixed(4));
    if (isNum(run.duration_s)) add("duration", fmtSec(run.duration_s));
    return h("div", { class: "cards", id: "metrics" }, cards);
  }

  function categoryChart(byCat) {
    const entries = Object.entries(byCat || {});
    if (!entries.length) return null;
    const rows = entries.map(([cat, m]) => {
      const rate = isNum(m.pass_rate) ? m.pass_rate : (isNum(m.tasks) && m.tasks ? (m.solved || 0) / m.tasks : 0);
      const fill = h("div", { class: "fill" });
      fill.style.width = Math.max(0, Math.min(100, 100 * rate)).toFixed(1) + "%"; // CSSOM: allowed by the CSP
      return h("div", { class: "barrow", "data-category": cat },
        h("span", { class: "barlabel", title: cat }, cat),
        h("div", { class: "bar", role: "img", "aria-label": `${cat}: ${fmtPct(rate)}` }, fill),
        h("span", { class: "barvalue" }, `${fmtPct(rate)}  (${fmtInt(m.solved)}/${fmtInt(m.tasks)})`));
    });
    return h("section", { id: "categories" }, h("h2", {}, "Pass rate by category"), rows);
  }

  async function showRun(my, key) {
    const run = await api("/api/run", { run: key });
    if (my !== gen) return;
    setCrumbs([{ text: "runs", href: "#/" }, { text: run.run_id }]);
    const st = tableState.get(key) || { offset: 0, limit: 100, sort: "task_id", desc: false, q: "", outcome: "", status: "", category: "", flag: "" };
    tableState.set(key, st);

    const head = h("div", { id: "runhead" });
    const table = h("table", { id: "tasks", class: "grid", "data-state": "loading" });
    const pager = h("div", { class: "pager" });
    const liveBox = h("section", { id: "livebox", hidden: "" });
    const controls = taskControls(run, st, () => { st.offset = 0; loadTasks(); });

    function renderHead(r) {
      const errs = Object.entries(r.errors_by_kind || {});
      fill(head,
        h("h1", {}, [r.benchmark, r.harness, r.model].filter(Boolean).join(" / ") || r.run_id),
        h("p", { class: "sub" }, r.run_id, " ", badge(r.status), r.live ? badge("live") : null,
          r.stale ? badge("stale (process gone)", "stale") : null,
          " env ", r.environment || "–", " · started ", fmtDate(r.started_at), " UTC",
          " · index ", fmtInt(r.index.rows), " tasks in ", fmtSec(r.index.build_s)),
        r.error ? h("pre", { class: "error" }, r.error) : null,
        r.unreadable ? h("p", { class: "error" }, "Unreadable run files: ", r.unreadable) : null,
        metricCards(r), categoryChart(r.by_category),
        errs.length ? h("section", { id: "errors" }, h("h2", {}, "Errors by kind"),
          h("ul", {}, errs.map(([k, n]) => h("li", {}, h("code", {}, k), ": ", fmtInt(n))))) : null,
        r.index.unreadable.length ? h("p", { class: "error" }, "Unreadable detail files: ", r.index.unreadable.join(", ")) : null);
    }

    let loading = 0;
    async function loadTasks() {
      const mine = ++loading;
      table.dataset.state = "loading";
      const page = await api("/api/tasks", { run: key, offset: st.offset, limit: st.limit, sort: st.sort,
        desc: st.desc ? 1 : "", q: st.q, outcome: st.outcome, status: st.status, category: st.category, flag: st.flag });
      if (my !== gen || mine !== loading) return;
      const headRow = h("tr", {}, COLUMNS.map(([col, label]) => {
        const arrow = st.sort === col ? (st.desc ? " ▼" : " ▲") : "";
        return h("th", { "data-col": col, class: NUMERIC.has(col) ? "sortable num" : "sortable", "aria-sort": st.sort === col ? (st.desc ? "descending" : "ascending") : null,
          on: { click: () => { if (st.sort === col) st.desc = !st.desc; else { st.sort = col; st.desc = false; } st.offset = 0; loadTasks(); } } },
        label + arrow);
      }));
      const body = page.rows.map((r) => h("tr", { "data-task": r.task_id, class: "o-" + r.outcome }, COLUMNS.map(([col]) => cell(key, col, r))));
      fill(table, h("thead", {}, headRow), h("tbody", {}, body));
      const last = Math.min(page.offset + page.rows.length, page.matched);
      fill(pager,
        h("button", { type: "button", disabled: page.offset <= 0 ? "" : null, on: { click: () => { st.offset = Math.max(0, st.offset - st.limit); loadTasks(); } } }, "‹ prev"),
        h("span", { class: "count", id: "taskcount" }, page.matched ? `${fmtInt(page.offset + 1)}–${fmtInt(last)} of ${fmtInt(page.matched)}` : "no tasks match",
          page.matched !== page.total ? ` (filtered from ${fmtInt(page.total)})` : ""),
        h("button", { type: "button", disabled: last >= page.matched ? "" : null, on: { click: () => { st.offset += st.limit; loadTasks(); } } }, "next ›"));
      table.dataset.state = "ready";
      table.dataset.matched = String(page.matched);
    }

    renderHead(run);
    fill(app, head, liveBox, h("section", { id: "tasksection" }, h("h2", {}, "Tasks"), controls, table, pager),
      run.params ? h("details", { id: "params" }, h("summary", {}, "params.json"), h("pre", {}, JSON.stringify(run.params, null, 2))) : null);
    await loadTasks();
    if (run.live) startLive(my, key, run, liveBox, async () => {
      const fresh = await api("/api/run", { run: key });
      if (my !== gen) return fresh;
      renderHead(fresh);
      await loadTasks();
      return fresh;
    });
  }

  function taskControls(run, st, changed) {
    const f = run.facets || {};
    const select = (name, label, values) => {
      const sel = h("select", { name, "aria-label": label, on: { change: () => { st[name] = sel.value; changed(); } } },
        h("option", { value: "" }, `${label}: all`),
        Object.entries(values || {}).map(([v, n]) => h("option", { value: v }, `${v} (${n})`)),
        name === "flag" && Object.keys(values || {}).length ? h("option", { value: "*" }, "any flag") : null);
      sel.value = st[name] || "";
      return sel;
    };
    let t = null;
    const search = h("input", { type: "search", name: "q", placeholder: "filter tasks (id, category, error, flag)", "aria-label": "filter tasks",
      on: { input: () => { clearTimeout(t); t = setTimeout(() => { st.q = search.value; changed(); }, 200); } } });
    search.value = st.q;
    const size = h("select", { name: "limit", "aria-label": "rows per page", on: { change: () => { st.limit = Number(size.value); changed(); } } },
      [50, 100, 250, 500].map((n) => h("option", { value: String(n) }, `${n} / page`)));
    size.value = String(st.limit);
    return h("div", { class: "controls" }, search, select("outcome", "outcome", f.outcome), select("status", "status", f.status),
      select("category", "category", f.category), select("flag", "flag", f.flag), size);
  }

  // Live mode: tail progress.jsonl by byte offset; refresh the page when tasks commit.
  function startLive(my, key, run, box, refresh) {
    fill(liveBadge, badge("live"));
    box.hidden = false;
    const list = h("ol", { id: "events", reversed: "" });
    const status = h("p", { id: "livestatus" });
    fill(box, h("h2", {}, "Live"), status, list);
    let offset = Math.max(0, (run.progress_size || 0) - 64 * 1024);
    let pending = false;
    let busy = false;
    let lastRefresh = 0;
    const recent = [];
    const showStatus = (r) => fill(status, `${fmtInt(r.counts.done)} / ${fmtInt(r.counts.total)} tasks done · `,
      `${fmtInt(r.counts.running)} running · ${fmtInt(r.counts.errors)} errors · ${fmtInt(r.counts.retries)} retries · updated ${fmtDate(r.updated_at)} UTC`);
    showStatus(run);
    const describe = (e) => {
      const bits = [fmtDate(e.ts).slice(11), " ", h("code", {}, e.event)];
      if (e.task_id) bits.push(" ", e.task_id);
      if (e.attempt) bits.push(` #${e.attempt}`);
      if (e.try_no > 1) bits.push(` try ${e.try_no}`);
      if (e.status) bits.push(" ", badge(e.status));
      if (e.correct === true) bits.push(" ", badge("pass"));
      if (e.correct === false) bits.push(" ", badge("fail"));
      if (e.error_kind) bits.push(" ", h("code", {}, e.error_kind));
      if (e.node) bits.push(" on ", h("code", {}, e.node));
      if (isNum(e.backoff_s)) bits.push(` backoff ${fmtSec(e.backoff_s)}`);
      if (e.error) bits.push(" — ", e.error.slice(0, 300));
      return h("li", { class: "ev-" + e.event }, bits);
    };
    const tick = async () => {
      if (my !== gen) { stopTimers(); return; }
      if (busy) return;
      busy = true;
      try {
        const chunk = await api("/api/progress", { run: key, offset });
        if (my !== gen) return;
        offset = chunk.offset;
        let finished = false;
        for (const e of chunk.events) {
          recent.unshift(e);
          if (e.event === "task_finished" || e.event === "request_finished") pending = true;
          if (e.event === "request_finished") finished = true;
        }
        recent.length = Math.min(recent.length, 50);
        if (chunk.events.length) fill(list, ...recent.map(describe));
        if (pending && (finished || Date.now() - lastRefresh > 1500)) {
          pending = false;
          lastRefresh = Date.now();
          const fresh = await refresh();
          if (fresh && my === gen) {
            showStatus(fresh);
            if (!fresh.live) { stopTimers(); fill(liveBadge, badge(fresh.status)); }
          }
        }
      } catch (err) {
        fill(status, errorBox(err));
      } finally {
        busy = false;
      }
    };
    every(1000, tick);
    tick();
  }

  // ---------------------------------------------------------------- task page
  const LONG = 4000;
  function longText(text, cls) {
    const s = clean(text);
    const pre = h("pre", { class: cls }, s.length > LONG ? s.slice(0, LONG) : s);
    if (s.length <= LONG) return pre;
    const more = h("button", { type: "button", class: "more", on: { click: () => { fill(pre, s); more.remove(); } } },
      `show all ${fmtInt(s.length)} characters`);
    return h("div", {}, pre, more);
  }

  function diffView(patch) {
    const pre = h("pre", { class: "diff" });
    for (const line of clean(patch).split("\n")) {
      let cls = "";
      if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff ")) cls = "file";
      else if (line.startsWith("@@")) cls = "hunk";
      else if (line.startsWith("+")) cls = "add";
      else if (line.startsWith("-")) cls = "del";
      pre.append(h("span", { class: cls }, line + "\n"));
    }
    return pre;
  }

  function prettyArgs(text) {
    try { return JSON.stringify(JSON.parse(text), null, 2); } catch { return text; }
  }

  function stepView(s) {
    const facts = [];
    if (s.finish_reason) facts.push(`finish ${s.finish_reason}`);
    if (s.prompt_tokens || s.completion_tokens) facts.push(`tokens ${fmtInt(s.prompt_tokens || 0)} in / ${fmtInt(s.completion_tokens || 0)} out`);
    if (isNum(s.model_latency_s)) facts.push(`model ${fmtSec(s.model_latency_s)}`);
    if (isNum(s.exec_latency_s)) facts.push(`exec ${fmtSec(s.exec_latency_s)}`);
    if (isNum(s.exit_code)) facts.push(`exit ${s.exit_code}`);
    return h("div", { class: "step", "data-index": s.index },
      h("div", { class: "stephead" }, h("strong", {}, `Step ${s.index}`), " ", h("span", { class: "muted" }, facts.join(" · "))),
      s.reasoning ? h("details", { class: "reasoning" }, h("summary", {}, "reasoning"), longText(s.reasoning, "reasoning")) : null,
      s.content ? h("div", { class: "part" }, h("div", { class: "label" }, "assistant"), longText(s.content, "content")) : null,
      (s.tool_calls || []).map((tc) => h("div", { class: "part" }, h("div", { class: "label" }, "tool call ", h("code", {}, tc.name)),
        longText(prettyArgs(tc.arguments || ""), "toolcall"))),
      s.action ? h("div", { class: "part" }, h("div", { class: "label" }, "action"), longText(s.action, "action")) : null,
      s.observation !== undefined && s.observation !== null ? h("div", { class: "part" },
        h("div", { class: "label" }, "observation", isNum(s.exit_code) ? ` (exit ${s.exit_code})` : ""), longText(s.observation, "observation")) : null);
  }

  const STEP_PAGE = 200;
  function trajectoryView(t) {
    if (!t) return h("p", { class: "muted" }, "No trajectory recorded.");
    const steps = t.steps || [];
    const box = h("div", { class: "steps" });
    let shown = 0;
    const more = h("button", { type: "button", class: "more", on: { click: () => showMore() } });
    function showMore() {
      const next = steps.slice(shown, shown + STEP_PAGE);
      box.append(...next.map(stepView));
      shown += next.length;
      if (shown >= steps.length) more.remove();
      else more.textContent = `show ${Math.min(STEP_PAGE, steps.length - shown)} more steps (${steps.length - shown} left)`;
    }
    showMore();
    const took = isNum(t.started_at) && isNum(t.finished_at) ? fmtSec(t.finished_at - t.started_at) : "–";
    return h("section", { class: "trajectory" },
      h("h3", {}, `Trajectory: ${steps.length} step${steps.length === 1 ? "" : "s"}`),
      h("p", { class: "muted" }, `stop reason ${t.stop_reason || "–"} · took ${took}`), box, shown < steps.length ? more : null);
  }

  function kv(obj) {
    return h("dl", { class: "kv" }, Object.entries(obj).filter(([, v]) => v !== undefined && v !== null && v !== "")
      .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v instanceof Node ? v : String(v))]));
  }

  function attemptView(n, a) {
    const meta = a.meta || {};
    const usage = meta.usage || {};
    const extra = { ...(a.extra || {}) };
    const artifacts = { ...(a.artifacts || {}) };
    const patch = typeof artifacts.patch === "string" ? artifacts.patch : (typeof extra.model_patch === "string" ? extra.model_patch : null);
    delete artifacts.patch;
    delete extra.model_patch;
    const verifier = Object.entries(extra).map(([k, v]) => h("div", { class: "part" }, h("div", { class: "label" }, k),
      typeof v === "string" ? longText(v, "verifier") : longText(JSON.stringify(v, null, 2), "verifier")));
    // a provider spread over machines (ray_docker) names the node of each environment
    const nodes = [...new Set((meta.environments || []).map((e) => e && e.node).filter(Boolean))].join(", ");
    return h("div", { class: "attempt", "data-attempt": n },
      kv({ status: badge(a.status), node: nodes || null, correct: a.correct === true ? badge("pass") : a.correct === false ? badge("fail") : "–",
        score: fmtNum(a.score), "error kind": a.error_kind, "agent time": isNum(meta.agent_s) ? fmtSec(meta.agent_s) : null,
        "verify time": isNum(meta.verify_s) ? fmtSec(meta.verify_s) : null, duration: isNum(meta.duration_s) ? fmtSec(meta.duration_s) : null,
        tokens: usage.total_tokens ? `${fmtInt(usage.total_tokens)} (${fmtInt(usage.prompt_tokens)} in / ${fmtInt(usage.completion_tokens)} out, ${fmtInt(usage.calls)} calls)` : null,
        cost: usage.cost ? "$" + usage.cost.toFixed(4) : null }),
      a.error ? h("div", { class: "part" }, h("div", { class: "label" }, "error"), longText(a.error, "error")) : null,
      a.analysis && Object.keys(a.analysis).length ? h("section", { class: "analysis" }, h("h3", {}, "Analysis"),
        longText(JSON.stringify(a.analysis, null, 2), "json")) : null,
      a.final_answer ? h("div", { class: "part" }, h("div", { class: "label" }, "final answer"), longText(a.final_answer, "answer")) : null,
      (a.tries || []).length ? h("section", {}, h("h3", {}, "Tries"), h("table", { class: "grid tries" },
        h("thead", {}, h("tr", {}, ["try", "status", "duration", "error kind", "error"].map((t) => h("th", {}, t)))),
        h("tbody", {}, a.tries.map((t) => h("tr", {}, h("td", {}, t.try_no), h("td", {}, badge(t.status)),
          h("td", { class: "num" }, fmtSec(t.finished_at - t.started_at)), h("td", {}, t.error_kind || ""),
          h("td", {}, (t.error || "").slice(0, 500))))))) : null,
      trajectoryView(a.trajectory),
      patch ? h("section", { class: "patch" }, h("h3", {}, "Patch"), diffView(patch)) : null,
      verifier.length ? h("section", { class: "verifier" }, h("h3", {}, "Verifier output"), verifier) : null,
      Object.keys(artifacts).length ? h("details", {}, h("summary", {}, "artifacts"), longText(JSON.stringify(artifacts, null, 2), "json")) : null,
      h("details", {}, h("summary", {}, "meta"), longText(JSON.stringify(meta, null, 2), "json")));
  }

  async function showTask(my, key, taskId) {
    const data = await api("/api/task", { run: key, task: taskId });
    if (my !== gen) return;
    const d = data.detail;
    setCrumbs([{ text: "runs", href: "#/" }, { text: key === "." ? "run" : key.split("/").pop(), href: "#/run/" + enc(key) }, { text: d.task_id }]);
    const names = Object.keys(d.attempts).sort((a, b) => Number(a) - Number(b));
    const holder = h("div", { id: "attempt" });
    const tabs = h("div", { class: "tabs", role: "tablist" });
    const select = (n) => {
      for (const b of tabs.children) b.setAttribute("aria-selected", String(b.dataset.attempt === n));
      fill(holder, attemptView(n, d.attempts[n]));
    };
    tabs.append(...names.map((n) => h("button", { type: "button", role: "tab", "data-attempt": n, on: { click: () => select(n) } },
      `attempt ${n} `, badge(d.attempts[n].correct === true ? "pass" : d.attempts[n].correct === false ? "fail" : d.attempts[n].status))));
    fill(app,
      h("h1", { id: "taskid" }, d.task_id),
      kv({ category: d.category, outcome: data.row ? badge(data.row.outcome) : null, score: fmtNum(d.score), k: d.k,
        "attempts tried": d.attempts_tried, "solved at": d.solved_at, "reused from": d.reused_from }),
      names.length > 1 ? tabs : null, holder,
      data.log ? h("details", { id: "tasklog" }, h("summary", {}, data.log_truncated ? "task log (last 64 KB)" : "task log"), longText(data.log, "log")) : null);
    if (names.length) select(names[0]);
  }

  route();
})();
