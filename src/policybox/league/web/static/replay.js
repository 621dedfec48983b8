// A match's replay, played in its page: a MettaGrid match's grid drawn on a canvas from its replay's
// frames (the player's data-src, /api/matches/ID/replay: policybox.league.views.replays), or a PettingZoo
// match's moves, its table already in the page, and the board at each step from the page's JSON.
// Both have play/pause and a step slider. Every text a policy or the game controls -- a seat's name,
// an action, a board -- is set with textContent or drawn with fillText, never as markup.
"use strict";

(function () {
  const STEP_MS = 150;

  // A field's value at `step`: the last keyframe [step, value] at or before it.
  function at(frames, step) {
    let value = frames[0][1];
    for (const [from, frameValue] of frames) {
      if (from > step) break;
      value = frameValue;
    }
    return value;
  }

  // Play/pause, the slider of `box` and its failure marks (a button per failed agent, data-step its step
  // index); `show(step)` draws that step. A step index, from 0, is shown as people count steps, from 1.
  function controls(box, last, show) {
    const slider = box.querySelector("input.step");
    const shown = box.querySelector("output.step-shown");
    const button = box.querySelector("button.play");
    let timer = null;
    slider.max = String(last);
    const go = (step) => {
      slider.value = String(step);
      shown.textContent = String(step + 1);
      show(step);
    };
    const pause = () => {
      clearInterval(timer);
      timer = null;
      button.textContent = "play";
    };
    slider.addEventListener("input", () => {
      pause();
      go(Number(slider.value));
    });
    button.addEventListener("click", () => {
      if (timer !== null) return pause();
      if (Number(slider.value) >= last) go(0);
      button.textContent = "pause";
      timer = setInterval(() => {
        const next = Number(slider.value) + 1;
        if (next > last) return pause();
        go(next);
      }, STEP_MS);
    });
    for (const jump of box.querySelectorAll("button.jump")) {
      jump.addEventListener("click", () => {
        pause();
        go(Math.min(Number(jump.dataset.step), last));
      });
    }
    go(Number(slider.value));
  }

  // The failure mark of seat `seat` in `box`, if it failed: its step index and status.
  function failure(box, seat) {
    const jump = box.querySelector(`button.jump[data-seat="${seat}"]`);
    return jump ? { step: Number(jump.dataset.step), status: jump.dataset.status } : null;
  }

  // ---------------------------------------------------------------------------------------------
  // MettaGrid: the grid on a canvas

  const COLOURS = ["#2166ac", "#b2182b", "#1b7837", "#762a83", "#e08214", "#35978f", "#8c510a", "#c51b7d"];

  function mettagrid(player, replay) {
    const canvas = document.getElementById("replay-canvas");
    const context = canvas.getContext("2d");
    const select = document.getElementById("agent-select");
    const cell = Math.max(4, Math.floor(Math.min(canvas.width / replay.width, canvas.height / replay.height)));
    canvas.width = cell * replay.width;
    canvas.height = cell * replay.height;
    for (const agent of replay.agents) {
      const option = document.createElement("option");
      option.value = String(agent.seat);
      option.textContent = `seat ${agent.seat}: ${agent.name}`;
      select.append(option);
    }
    const text = (id, value) => {
      document.getElementById(id).textContent = value;
    };
    let step = 0;

    function panel() {
      const agent = replay.agents.find((a) => String(a.seat) === select.value);
      if (!agent) return;
      const action = at(agent.action, step);
      const inventory = at(agent.inventory, step)
        .filter(([, count]) => count > 0)
        .map(([item, count]) => `${replay.item_names[item] ?? item} ${count}`);
      const failed = failure(player, agent.seat);
      text("agent-seat", `${agent.seat}: ${agent.name}`);
      text(
        "agent-status",
        failed && step >= failed.step
          ? `${failed.status} at step ${failed.step + 1}: its fallback action since`
          : "playing",
      );
      text("agent-action", replay.action_names[action] ?? String(action));
      text("agent-reward", at(agent.reward, step).toFixed(3));
      text("agent-inventory", inventory.length ? inventory.join(", ") : "empty");
    }

    function draw() {
      context.fillStyle = "#ffffff";
      context.fillRect(0, 0, canvas.width, canvas.height);
      for (const thing of replay.objects) {
        const [x, y] = at(thing.location, step);
        context.fillStyle = thing.type === "wall" ? "#555555" : "#d8b365";
        context.fillRect(x * cell, y * cell, cell, cell);
      }
      context.font = `${Math.max(8, Math.floor(cell * 0.6))}px sans-serif`;
      context.textBaseline = "bottom";
      for (const agent of replay.agents) {
        const [x, y] = at(agent.location, step);
        context.fillStyle = COLOURS[agent.seat % COLOURS.length];
        context.beginPath();
        context.arc((x + 0.5) * cell, (y + 0.5) * cell, cell * 0.42, 0, 2 * Math.PI);
        context.fill();
        if (String(agent.seat) === select.value) {
          context.strokeStyle = "#000000";
          context.lineWidth = 2;
          context.stroke();
        }
        const failed = failure(player, agent.seat);
        if (failed && step >= failed.step) {  // a failed agent: crossed out
          context.strokeStyle = "#000000";
          context.lineWidth = 2;
          context.beginPath();
          context.moveTo(x * cell, y * cell);
          context.lineTo((x + 1) * cell, (y + 1) * cell);
          context.stroke();
        }
        context.fillStyle = "#000000";
        context.fillText(agent.name, x * cell, y * cell);
      }
    }

    const show = (shown) => {
      step = shown;
      draw();
      panel();
    };
    select.addEventListener("change", () => show(step));
    player.querySelector(".player-view").hidden = false;
    document.getElementById("player-note").textContent = `${replay.steps} steps; pick an agent to follow.`;
    controls(player, Math.max(0, replay.steps - 1), show);
  }

  // ---------------------------------------------------------------------------------------------
  // PettingZoo: the moves' rows and the board

  function moves(box, page) {
    const rows = Array.from(box.querySelectorAll("#moves tbody tr"));
    const board = document.getElementById("board");
    const list = box.querySelector(".moves-box");
    const played = page.moves || [];
    const last = played.length ? played[played.length - 1].step : 0;
    const show = (step) => {
      for (const row of rows) row.classList.toggle("current", Number(row.dataset.step) === step);
      const current = rows.find((row) => Number(row.dataset.step) === step);
      if (current) {
        // the row to the middle of the list's own box, never scrolling the page itself
        const offset = current.getBoundingClientRect().top - list.getBoundingClientRect().top;
        list.scrollTop += offset - list.clientHeight / 2;
      }
      if (board) {
        const shown = played.filter((move) => move.step <= step && move.board !== null && move.board !== undefined);
        board.textContent = shown.length ? shown[shown.length - 1].board : "";
      }
    };
    box.querySelector(".controls").hidden = false;
    controls(box, last, show);
  }

  async function fetched(url) {
    const answer = await fetch(url, { headers: { Accept: "application/json" } });
    if (!answer.ok) throw new Error(`${url}: ${answer.status}`);
    return answer.json();
  }

  const player = document.getElementById("replay-player");
  if (player) {
    fetched(player.dataset.src)
      .then((replay) => mettagrid(player, replay))
      .catch((error) => {
        document.getElementById("player-note").textContent = `The replay could not be played here (${error.message}); download it above.`;
      });
  }
  const box = document.getElementById("moves-player");
  const json = document.querySelector('link[rel="alternate"][type="application/json"]');
  if (box && json) fetched(json.getAttribute("href")).then((page) => moves(box, page));
})();
