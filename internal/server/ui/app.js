// berth's fleet page: polls GET /v1/dashboard every second and redraws.
// The token comes from the link `berth dev` prints (#token=...), or the
// form; it is kept in this tab's sessionStorage only.
(function () {
  "use strict";
  const $ = (s) => document.querySelector(s);
  let token = sessionStorage.getItem("berth-token") || "";
  const frag = new URLSearchParams(location.hash.slice(1));
  if (frag.get("token")) {
    token = frag.get("token");
    sessionStorage.setItem("berth-token", token);
    history.replaceState(null, "", location.pathname + location.search);
  }

  async function text(path) {
    const r = await fetch(path, { headers: { Authorization: "Bearer " + token } });
    const body = await r.text();
    if (!r.ok) {
      let msg = r.statusText;
      try { msg = JSON.parse(body).error.message; } catch (_) { /* not JSON */ }
      throw new Error(msg);
    }
    return body;
  }

  async function api(method, path) {
    const r = await fetch(path, { method, headers: { Authorization: "Bearer " + token } });
    const body = await r.json().catch(() => ({}));
    if (!r.ok) {
      const e = new Error((body.error && body.error.message) || r.statusText);
      e.status = r.status;
      throw e;
    }
    return body;
  }

  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") n.className = v;
      else if (k.startsWith("on")) n.addEventListener(k.slice(2), v);
      else n.setAttribute(k, v === true ? "" : v);
    }
    for (const k of kids.flat()) if (k !== undefined && k !== null) n.append(k instanceof Node ? k : String(k));
    return n;
  }

  const pct = (x) => (100 * x).toFixed(1) + "%";
  const hours = (x) => x.toFixed(1) + " GPU-h";
  const dur = (ns) => { const s = ns / 1e9; return s >= 3600 ? (s / 3600).toFixed(1) + "h" : s >= 60 ? Math.round(s / 60) + "m" : Math.round(s) + "s"; };
  const when = (t) => t ? new Date(t).toLocaleTimeString() : "";

  function headline(d) {
    const lp = d.topology.largest_placeable;
    $("#lp-node").textContent = lp.node;
    $("#lp-pod").textContent = lp.pod;
    $("#lp-any").textContent = lp.any;
    $("#util").textContent = pct(d.utilization);
    $("#frag").textContent = pct(d.topology.fragmentation);
    $("#free").textContent = d.topology.free_gpus + " / " + d.topology.total_gpus;
    $("#free-nodes").textContent = d.topology.free_nodes_full;
    $("#shared").textContent = d.topology.shared_gpus ? d.topology.shared_gpus + " GPUs, " + d.topology.shared_free_milli + " milli free" : "none";
    const bw = d.topology.checkpoint_bandwidth / 1e9;
    $("#ckpt-bw").textContent = bw.toFixed(1) + " GB/s " + (d.topology.checkpoint_bandwidth_measured ? "measured" : "assumed") +
      (d.topology.checkpoint_bandwidth < d.topology.checkpoint_bandwidth_floor ? " · below the floor: preemption stopped" : "");
  }

  function grid(d) {
    const g = $("#grid");
    g.replaceChildren(...d.pods.map((p) => el("div", { class: "pod", "data-pod": p.name },
      el("h3", {}, "pod " + p.name + " · " + p.nodes.length + " nodes"),
      el("div", { class: "nodes" }, p.nodes.map((n) => el("div", {
        class: "node" + (n.quarantined ? " quarantined" : "") + (n.draining ? " draining" : "") + (n.health !== "healthy" ? " unhealthy" : ""),
        "data-node": n.id,
      }, el("span", { class: "name" }, n.id), n.gpus.map((c, i) => el("span", {
        class: "gpu " + c.kind + (c.stopping ? " stopping" : "") + (c.shares ? " shared" : ""),
        style: c.shares ? "--used:" + (c.milli / 10) + "%" : undefined,
        "data-kind": c.kind, "data-owner": c.owner, "data-gpu": i, "data-shares": c.shares || undefined,
        "data-tip": n.id + " GPU " + i + ": " + c.kind + (c.shares ? " · shared by " + c.shares + ", " + c.milli + "/1000 milli used" : "") +
          (c.owner ? " · " + c.owner : "") + (c.stopping ? " (stopping)" : ""),
      }))))))));
  }

  function queue(d) {
    $("#queue-count").textContent = d.queue.length + " waiting · " + d.running_jobs + " running";
    $("#queue tbody").replaceChildren(...d.queue.map((q) => el("tr", { "data-job": q.id },
      el("td", {}, q.name ? q.id + " (" + q.name + ")" : q.id + (q.kind === "inference" ? " (replicas)" : "")),
      el("td", {}, q.team || ""), el("td", {}, q.kind === "inference" ? q.replicas + " replica(s)" : q.gpus), el("td", {}, q.topology || ""), el("td", {}, q.priority),
      el("td", {}, q.waiting || ""), el("td", {}, q.held_gpus ? q.held_gpus + "/" + q.gpus : ""),
      el("td", {}, when(q.eta)), el("td", { class: "reason" }, q.reason))));
  }

  function deployments(d) {
    $("#deployments tbody").replaceChildren(...d.deployments.map((x) => el("tr", { "data-deployment": x.id },
      el("td", {}, x.id), el("td", {}, x.desired_replicas), el("td", {}, x.actual_replicas), el("td", {}, x.min_replicas),
      el("td", {}, x.max_replicas), el("td", {}, x.stopping_replicas || ""),
      el("td", { class: "reason" }, x.pending_reason ? x.pending_reason.message : ""))));
  }

  async function act(id, action, button) {
    button.disabled = true;
    try {
      await api("POST", "/v1/alerts/" + encodeURIComponent(id) + "/actions/" + encodeURIComponent(action));
      $("#status").textContent = action + " taken on " + id;
    } catch (e) {
      $("#status").textContent = "could not " + action + ": " + e.message;
      button.disabled = false;
    }
    refresh();
  }

  function alerts(d) {
    const open = d.alerts.filter((a) => !a.resolved_at);
    const resolved = d.alerts.filter((a) => a.resolved_at);
    $("#resolved").hidden = resolved.length === 0;
    $("#resolved summary").textContent = resolved.length + " resolved alert" + (resolved.length === 1 ? "" : "s");
    $("#resolved-list").replaceChildren(...resolved.map(alertView));
    $("#alerts").replaceChildren(...open.map(alertView));
  }

  function alertView(a) {
    const p = a.page;
    const kids = [el("h3", {}, (p ? "PAGE · " : a.severity.toUpperCase() + " · ") + a.kind + (a.subject ? " · " + a.subject : "")),
      el("div", {}, a.message)];
    if (p) {
      if (p.would_preempt && p.would_preempt.length) {
        kids.push(el("table", {}, el("tr", {}, ["would preempt", "team", "GPUs", "running", "since checkpoint", "cost"].map((h) => el("th", {}, h))),
          p.would_preempt.map((v) => el("tr", {}, el("td", {}, v.resize_to ? "shrink " + v.job + " to " + v.resize_to : v.job), el("td", {}, v.team), el("td", {}, v.gpus),
            el("td", {}, dur(v.runtime)), el("td", {}, dur(v.since_checkpoint)), el("td", {}, hours(v.cost_gpu_hours))))));
      }
      if (!a.resolved_at && !a.choice) {
        kids.push(el("div", {}, p.actions.map((x) => el("button", {
          class: "action" + (x.id === "preempt" ? " primary" : ""), "data-action": x.id,
          title: "costs " + hours(x.cost_gpu_hours) + ", " + x.replicas + " replicas",
          onclick: (ev) => act(a.id, x.id, ev.target),
        }, x.label + " (" + hours(x.cost_gpu_hours) + " of training progress)"))));
      }
    }
    if (a.choice) kids.push(el("div", { class: "choice" }, "chosen: " + a.choice.action + " by " + a.choice.by + " at " + when(a.choice.at)));
    return el("div", { class: "alert" + (p ? " page" : "") + (a.resolved_at ? " resolved" : ""), "data-alert": a.id }, kids);
  }

  // Plots of the last hours: one SVG polyline per series, from the
  // samples the server keeps in its table (GET /v1/history).
  function plot(id, samples, series, yMax) {
    const svg = document.querySelector(id + " svg");
    const W = 300, H = 90, L = 26, B = 12;
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("preserveAspectRatio", "none");
    const t0 = samples.length ? Date.parse(samples[0].at) : 0, t1 = samples.length ? Date.parse(samples[samples.length - 1].at) : 1;
    let top = yMax;
    if (top === undefined) {
      top = 1;
      for (const s of series) for (const x of samples) top = Math.max(top, s.value(x));
    }
    const X = (t) => L + (W - L - 2) * (t1 > t0 ? (t - t0) / (t1 - t0) : 1), Y = (v) => H - B - (H - B - 4) * v / top;
    const ns = "http://www.w3.org/2000/svg";
    const mk = (tag, attrs, txt) => { const n = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, v); if (txt !== undefined) n.textContent = txt; return n; };
    const kids = [mk("text", { x: 0, y: 10 }, String(Math.round(top))), mk("text", { x: 0, y: H - B }, "0"),
      mk("line", { x1: L, y1: H - B, x2: W, y2: H - B, stroke: "#dfe3e8" })];
    if (samples.length) {
      kids.push(mk("text", { x: L, y: H - 1 }, new Date(t0).toLocaleTimeString()), mk("text", { x: W - 48, y: H - 1 }, new Date(t1).toLocaleTimeString()));
    }
    series.forEach((s, i) => kids.push(mk("polyline", { class: "k" + i, "data-series": s.name,
      points: samples.map((x) => X(Date.parse(x.at)).toFixed(1) + "," + Y(s.value(x)).toFixed(1)).join(" ") })));
    svg.replaceChildren(...kids);
  }

  async function plots() {
    try {
      const h = await api("GET", "/v1/history?since=6h");
      const ss = h.samples;
      $("#history-note").textContent = ss.length + " samples, one every " + h.every;
      plot("#plot-lp", ss, [{ name: "node", value: (x) => x.largest_node }, { name: "pod", value: (x) => x.largest_pod }, { name: "any", value: (x) => x.largest_any }]);
      plot("#plot-util", ss, [{ name: "utilization", value: (x) => x.total_gpus ? 100 * x.allocated_gpus / x.total_gpus : 0 }], 100);
      plot("#plot-queue", ss, [0, 1, 2, 3].map((k) => ({ name: ["<8", "8-63", "64-255", ">=256"][k], value: (x) => x.queued[k] })));
      plot("#plot-preempt", ss, [{ name: "preemptions", value: (x) => x.preemptions }]);
    } catch (e) {
      $("#history-note").textContent = "history unavailable: " + e.message;
    }
  }

  async function quotas() {
    try {
      const q = await api("GET", "/v1/quotas");
      $("#quotas tbody").replaceChildren(...q.quotas.map((x) => el("tr", { "data-scope": x.scope },
        el("td", {}, x.scope), el("td", {}, x.guaranteed_gpus), el("td", {}, x.max_gpus || "no cap"), el("td", {}, x.used_gpus),
        el("td", {}, x.borrowed_gpus || ""),
        el("td", { class: "reason" }, x.max_gpus && x.used_gpus >= x.max_gpus ? "at its cap" : x.used_gpus > x.guaranteed_gpus ? "borrowing past its guarantee" : ""))));
    } catch (e) { /* a team token reads its own scopes; nothing to show otherwise */ }
  }

  // The detail panel: #job=ID or #node=ID, opened by a click on a queue
  // row, a GPU cell or a node's name.
  let last = null;
  async function detail() {
    const h = new URLSearchParams(location.hash.slice(1));
    const job = h.get("job"), node = h.get("node");
    if (!job && !node) { $("#detail").hidden = true; return; }
    $("#detail").hidden = false;
    const body = $("#detail-body");
    try {
      if (job) {
        const j = await api("GET", "/v1/jobs/" + encodeURIComponent(job));
        let logs;
        try { logs = await text("/v1/jobs/" + encodeURIComponent(job) + "/logs?tail=40"); } catch (e) { logs = "(" + e.message + ")"; }
        body.replaceChildren(el("h2", { "data-detail": "job" }, "job " + j.id + (j.name ? " (" + j.name + ")" : "")),
          el("div", {}, j.shape.gpus + " GPUs · topology " + j.shape.topology + " · " + j.state + " · priority " + j.priority +
            (j.preemptible ? " · preemptible" : "") + (j.preempt_count ? " · preempted " + j.preempt_count + "×" : "")),
          j.pending_reason ? el("p", { class: "reason" }, "why pending: " + j.pending_reason.message) : null,
          j.elastic ? el("div", { "data-elastic": "" }, "elastic " + j.elastic.min_gpus + "-" + j.elastic.max_gpus + " GPUs · runs at " + (j.size || 0) +
            " · resized " + (j.resize_count || 0) + "×") : null,
          j.elastic && j.resizes ? el("table", { class: "resizes" }, j.resizes.map((r) => el("tr", {}, el("td", {}, when(r.at)),
            el("td", {}, r.from + " → " + r.to + " GPUs"), el("td", {}, r.why)))) : null,
          el("h3", {}, "allocations"), el("ul", {}, (j.allocations || []).map((a) => el("li", {}, a.id + " on " + a.node_id + " GPUs " + a.gpu_mask + (a.stopping ? " (stopping)" : "")))),
          el("h3", {}, "history"), el("table", { class: "history" }, (j.history || []).map((e) => el("tr", {}, el("td", {}, when(e.at)), el("td", {}, e.event), el("td", {}, e.detail || "")))),
          el("h3", {}, "log (last 40 lines of stdout)"), el("pre", { class: "logs" }, logs || "(empty)"));
      } else {
        const n = await api("GET", "/v1/nodes/" + encodeURIComponent(node));
        const cells = last ? last.pods.flatMap((p) => p.nodes).find((x) => x.id === node) : null;
        const acts = isAdmin ? ["drain", "undrain", "quarantine", "unquarantine"].map((a) => el("button", { "data-node-action": a,
          onclick: async (ev) => { ev.target.disabled = true; try { await api("POST", "/v1/nodes/" + encodeURIComponent(node) + "/" + a); $("#status").textContent = a + " " + node; } catch (e) { $("#status").textContent = "could not " + a + ": " + e.message; } refresh(); detail(); } }, a)) : [];
        body.replaceChildren(el("h2", { "data-detail": "node" }, "node " + n.id),
          el("div", {}, "pod " + n.pod + " · " + (n.pool || "no pool") + " · " + n.gpus + "× " + n.model + " · " + n.health +
            (n.draining ? " · draining" : "") + (n.quarantined ? " · quarantined" : "") + (n.quarantined_gpus ? " · quarantined GPUs " + n.quarantined_gpus : "")),
          el("div", { class: "muted" }, "epoch " + n.boot_epoch + " · last heartbeat " + when(n.last_heartbeat) + " · free GPUs " + n.free_gpus),
          el("h3", {}, "GPUs"), el("table", {}, (cells ? cells.gpus : []).map((c, i) => el("tr", {}, el("td", {}, "GPU " + i), el("td", {}, c.kind),
            el("td", {}, c.owner ? el("a", { href: "#job=" + encodeURIComponent(c.owner) }, c.owner) : ""), el("td", {}, c.alloc || "")))),
          el("div", { class: "acts" }, acts));
      }
    } catch (e) {
      body.replaceChildren(el("p", { class: "error" }, e.message));
    }
  }
  let isAdmin = false;

  let timer = null, ticks = 0;
  async function refresh() {
    clearTimeout(timer);
    try {
      const d = await api("GET", "/v1/dashboard");
      $("#login").hidden = true;
      $("#app").hidden = false;
      last = d;
      isAdmin = d.role === "admin";
      headline(d); grid(d); queue(d); deployments(d); alerts(d);
      if (++ticks % 5 === 1) { plots(); quotas(); }
      $("#status").textContent = d.leader ? "live" : "live (from a follower)";
      $("#updated").textContent = "updated " + when(d.at);
      document.body.dataset.updated = d.at;
    } catch (e) {
      if (e.status === 401 || e.status === 403 || !token) {
        $("#login").hidden = false;
        $("#app").hidden = true;
        $("#login-error").textContent = token ? e.message : "";
        return;
      }
      $("#status").textContent = "server unreachable: " + e.message + " (retrying)";
    }
    timer = setTimeout(refresh, 1000);
  }

  $("#login").addEventListener("submit", (ev) => {
    ev.preventDefault();
    token = $("#token-input").value.trim();
    sessionStorage.setItem("berth-token", token);
    refresh();
  });
  window.addEventListener("hashchange", detail);
  $("#detail-close").addEventListener("click", () => { history.replaceState(null, "", location.pathname); detail(); });
  document.addEventListener("click", (ev) => {
    const t = ev.target;
    const row = t.closest && t.closest("tr[data-job]");
    if (row && !row.dataset.job.startsWith("deployment")) { location.hash = "job=" + row.dataset.job; return; }
    if (t.classList && t.classList.contains("gpu") && t.dataset.owner && t.dataset.kind !== "inference") { location.hash = "job=" + t.dataset.owner; return; }
    if (t.classList && t.classList.contains("name") && t.parentElement.dataset.node) location.hash = "node=" + t.parentElement.dataset.node;
  });
  document.addEventListener("mouseover", (ev) => {
    const tip = $("#tip"), t = ev.target.dataset && ev.target.dataset.tip;
    if (!t) { tip.hidden = true; return; }
    tip.textContent = t;
    tip.style.left = ev.clientX + 12 + "px";
    tip.style.top = ev.clientY + 12 + "px";
    tip.hidden = false;
  });
  refresh();
  detail();
})();
