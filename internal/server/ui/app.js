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
    const recent = d.alerts.filter((a) => a.resolved_at).slice(0, 3);
    $("#alerts").replaceChildren(...open.concat(recent).map((a) => {
      const p = a.page;
      const kids = [el("h3", {}, (p ? "PAGE · " : a.severity.toUpperCase() + " · ") + a.kind + (a.subject ? " · " + a.subject : "")),
        el("div", {}, a.message)];
      if (p) {
        if (p.would_preempt && p.would_preempt.length) {
          kids.push(el("table", {}, el("tr", {}, ["would preempt", "team", "GPUs", "running", "since checkpoint", "cost"].map((h) => el("th", {}, h))),
            p.would_preempt.map((v) => el("tr", {}, el("td", {}, v.job), el("td", {}, v.team), el("td", {}, v.gpus),
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
    }));
  }

  let timer = null;
  async function refresh() {
    clearTimeout(timer);
    try {
      const d = await api("GET", "/v1/dashboard");
      $("#login").hidden = true;
      $("#app").hidden = false;
      headline(d); grid(d); queue(d); deployments(d); alerts(d);
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
  document.addEventListener("mouseover", (ev) => {
    const tip = $("#tip"), t = ev.target.dataset && ev.target.dataset.tip;
    if (!t) { tip.hidden = true; return; }
    tip.textContent = t;
    tip.style.left = ev.clientX + 12 + "px";
    tip.style.top = ev.clientY + 12 + "px";
    tip.hidden = false;
  });
  refresh();
})();
