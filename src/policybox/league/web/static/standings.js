// The live standings: every two seconds this reads the page's JSON (the table's data-source, that is
// /api/standings) and writes its rows into the table. Every cell is set with textContent, never as
// markup, so a name or a reason a policy chose stays text. The cells read as the page's template
// (templates/standings.html, macros.html) writes them: a change to one is a change to the other.
"use strict";

(function () {
  const PERIOD_MS = 2000;
  const table = document.getElementById("standings");
  const played = document.getElementById("played");
  const pulse = document.getElementById("pulse");
  if (!table || !table.dataset.source) return;

  // toFixed rounds a tie away from zero, as the page's `fixed` filter does; 0 for -0, as it does.
  const fixed = (value, places) => (value === null || value === undefined ? "—" : (value + 0).toFixed(places));
  const firstLine = (text) => text.split("\n")[0];

  function rating(value) {
    return value ? `${fixed(value.ordinal, 2)} (μ ${fixed(value.mu, 2)} ± ${fixed(value.sigma, 2)})` : "—";
  }

  function reward(value) {
    return value ? `${fixed(value.mean, 3)} [${fixed(value.ci95[0], 3)}, ${fixed(value.ci95[1], 3)}]` : "—";
  }

  function statuses(counts) {
    return Object.keys(counts).sort().map((status) => `${status} ${counts[status]}`).join(" · ");
  }

  function note(row) {
    const parts = [];
    if (row.reason) parts.push(firstLine(row.reason));
    if (row.team_best) parts.push(`ranked as its team's best name, ${row.team_best}`);
    if (row.forfeit_note) parts.push(row.forfeit_note);
    if (row.latest) {
      const why = row.latest.reason ? `: ${firstLine(row.latest.reason)}` : "";
      parts.push(`v${row.latest.version} ${row.latest.state}${why}`);
    }
    return parts.join(" · ");
  }

  function cell(text, className) {
    const td = document.createElement("td");
    if (className) td.className = className;
    td.textContent = text;
    return td;
  }

  function link(href, text, className) {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    if (className) a.className = className;
    return a;
  }

  function nameCell(name, team) {
    const td = document.createElement("td");
    td.append(link(`/names/${encodeURIComponent(name)}`, name));
    if (team) {
      const of = document.createElement("span");
      of.className = "team-of";
      of.append("(", link(`/teams/${encodeURIComponent(team)}`, team, "team"), ")");
      td.append(" ", of);
    }
    return td;
  }

  function versusCell(row) {
    const td = cell(row.versus_next || "");
    if (row.versus_why) td.title = row.versus_why;
    return td;
  }

  function tableRow(row) {
    const tr = document.createElement("tr");
    if (row.rank === null) tr.className = "unranked";
    tr.append(
      cell(row.rank === null ? "—" : String(row.rank), "number"),
      nameCell(row.name, row.team),
      cell(`v${row.version}`, "number"),
      cell(row.state, `state ${row.state}`),
      cell(rating(row.rating), "number"),
      cell(reward(row.reward), "number"),
      versusCell(row),
      cell(String(row.matches), "number"),
      cell(statuses(row.statuses)),
      cell(String(row.forfeits), "number"),
      cell(note(row), "note"),
    );
    return tr;
  }

  // The ladder's pulse line, as the macro pulse (macros.html) writes it.
  function showPulse(now) {
    pulse.className = `pulse ${now.state}`;
    document.getElementById("pulse-line").textContent = now.line;
  }

  async function refresh() {
    try {
      const answer = await fetch(table.dataset.source, { cache: "no-store", credentials: "same-origin" });
      if (answer.ok) {
        const standings = await answer.json();
        table.tBodies[0].replaceChildren(...standings.rows.map(tableRow));
        if (played) played.textContent = String(standings.matches);
        if (pulse) showPulse(standings.pulse);
      }
    } catch (error) {
      // The server is restarting or the network dropped: the next turn tries again.
    }
    setTimeout(refresh, PERIOD_MS);
  }

  setTimeout(refresh, PERIOD_MS);
})();
