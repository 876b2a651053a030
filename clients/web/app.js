// Browser call widget: the microphone goes to the agent over WebRTC, every other event
// (transcripts, understanding, reply text, confirmations) over the call's WebSocket.
// Protocol: protocol/README.md. No framework, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
const ui = {
  form: $("call-form"), customer: $("customer"), token: $("token"),
  call: $("call"), hangup: $("hangup"), echo: $("echo"),
  status: $("status"), error: $("error"),
  partial: $("partial"), turns: $("turns"), confirmBar: $("confirm-bar"),
  confirm: $("confirm"), cancel: $("cancel"), textForm: $("text-form"),
  text: $("text"), send: $("send"), audio: $("reply-audio"),
};

let call = null; // {ws, pc, mic}

function setStatus(text) { ui.status.textContent = text; }

function showError(text) {
  ui.error.textContent = text;
  ui.error.hidden = !text;
}

function setInCall(active) {
  ui.call.disabled = active;
  ui.customer.disabled = active;
  ui.echo.disabled = active;
  ui.hangup.disabled = !active;
  for (const el of [ui.confirm, ui.cancel, ui.text, ui.send]) el.disabled = !active;
  if (!active) ui.confirmBar.classList.remove("pending");
}

async function sessionToken(customer) {
  const pasted = ui.token.value.trim();
  if (pasted) return pasted;
  const response = await fetch(`/dev/token?customer=${encodeURIComponent(customer)}`);
  if (!response.ok) {
    throw new Error(
      `no session token (the server's /dev/token said ${response.status}); paste one ` +
      `from "python -m agent token --customer ${customer}"`);
  }
  return (await response.json()).token;
}

// --- the call -----------------------------------------------------------------------

async function startCall() {
  showError("");
  const customer = ui.customer.value.trim();
  setInCall(true);
  try {
    setStatus("Getting a session token…");
    const token = await sessionToken(customer);
    setStatus("Asking for the microphone…");
    // Echo cancellation keeps the assistant's voice out of the microphone when it comes
    // from speakers; it also muffles the caller while the assistant talks (barge-in),
    // so with headphones it is better off.
    const echoCancellation = ui.echo.checked;
    const mic = await navigator.mediaDevices.getUserMedia({
      audio: { echoCancellation, noiseSuppression: echoCancellation, autoGainControl: true },
    });
    setStatus("Connecting…");
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${location.host}/`);
    call = { ws, pc: null, mic };
    ws.onopen = () => send({
      // aiortc decodes the browser's Opus to 48 kHz; the server converts at the edge.
      type: "session.start", sample_rate: 48000, codec: "pcm16",
      customer_id: customer, token,
    });
    ws.onmessage = (message) => onEvent(JSON.parse(message.data));
    ws.onclose = (close) => endCall(close.code === 1000 || close.code === 1005
      ? "Call ended." : `Call ended (${close.reason || close.code}).`);
    ws.onerror = () => showError("The connection to the agent failed.");
  } catch (error) {
    showError(error.message || String(error));
    endCall("Not connected.");
  }
}

async function startAudio() {
  const pc = new RTCPeerConnection({ iceServers: [] });
  call.pc = pc;
  for (const track of call.mic.getAudioTracks()) pc.addTrack(track, call.mic);
  pc.ontrack = (event) => {
    ui.audio.srcObject = event.streams[0] || new MediaStream([event.track]);
    ui.audio.play().catch(() => {}); // autoplay may wait for a gesture; Call was one
  };
  pc.onconnectionstatechange = () => {
    if (pc.connectionState === "connected") setStatus("In call: speak now.");
    if (pc.connectionState === "failed") showError("The audio connection failed.");
  };
  await pc.setLocalDescription(await pc.createOffer());
  await iceGatheringDone(pc, 3000); // no trickle: the offer carries every candidate
  send({ type: "webrtc.offer", sdp: pc.localDescription.sdp });
}

function iceGatheringDone(pc, timeoutMs) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      if (pc.iceGatheringState !== "complete") return;
      pc.removeEventListener("icegatheringstatechange", done);
      resolve();
    };
    pc.addEventListener("icegatheringstatechange", done);
    setTimeout(resolve, timeoutMs);
  });
}

function hangUp() {
  if (!call) return;
  setStatus("Hanging up…");
  send({ type: "session.end" }); // the server finishes what was said, then closes
  stopMedia();
}

function stopMedia() {
  if (!call) return;
  for (const track of call.mic.getTracks()) track.stop();
  if (call.pc) call.pc.close();
  ui.audio.srcObject = null;
}

function endCall(status) {
  stopMedia();
  call = null;
  setInCall(false);
  setPartial("");
  setStatus(status);
}

function send(event) {
  if (call && call.ws.readyState === WebSocket.OPEN) call.ws.send(JSON.stringify(event));
}

// --- events -> page -------------------------------------------------------------------

function onEvent(event) {
  switch (event.type) {
    case "session.created":
      setStatus("Connected; starting audio…");
      startAudio().catch((error) => showError(`Audio failed: ${error.message || error}`));
      break;
    case "webrtc.answer":
      call.pc.setRemoteDescription({ type: "answer", sdp: event.sdp })
        .catch((error) => showError(`Audio failed: ${error.message || error}`));
      break;
    case "input_audio_buffer.speech_started":
      turn(event.turn).dataset.state = "listening";
      setPartial("");
      break;
    case "input_audio_transcription.partial":
      setPartial(event.text);
      break;
    case "input_audio_transcription.completed":
      setPartial("");
      fill(turn(event.turn), ".transcript", event.text);
      turn(event.turn).dataset.state = "heard";
      break;
    case "understanding":
      showUnderstanding(turn(event.turn), event);
      ui.confirmBar.classList.toggle("pending", Boolean(event.needs_confirmation));
      break;
    case "response.text.delta": {
      const li = turn(event.turn);
      li.querySelector(".reply").textContent += event.delta;
      li.dataset.state = "replying";
      break;
    }
    case "response.done": {
      const li = turn(event.turn);
      fill(li, ".reply", event.text);
      li.dataset.state = event.status === "completed" ? "done" : "cancelled";
      break;
    }
    case "turn.metrics": {
      const ms = event.latency_ms && event.latency_ms.speech_end_to_response_first_delta;
      if (ms !== undefined) fill(turn(event.turn), ".latency", `${Math.round(ms)} ms`);
      break;
    }
    case "error":
      showError(`${event.message} (${event.code})`);
      break;
    case "session.ended":
      setStatus("Call ended.");
      break;
  }
}

function setPartial(text) {
  ui.partial.textContent = text || "…";
  ui.partial.classList.toggle("placeholder", !text);
}

function turn(number) {
  let li = ui.turns.querySelector(`li[data-turn="${number}"]`);
  if (li) return li;
  li = document.createElement("li");
  li.className = "turn";
  li.dataset.turn = String(number);
  li.innerHTML = `
    <p class="you"><span class="who">You</span>
      <span class="what"><span class="transcript"></span></span></p>
    <p class="understood"><span class="who">Understood</span>
      <span class="what"><span class="intent"></span><span class="entities"></span></span></p>
    <p class="agent"><span class="who">Assistant</span>
      <span class="what"><span class="reply"></span> <span class="latency"
        title="end of speech to the first words of the reply"></span></span></p>`;
  ui.turns.append(li);
  li.scrollIntoView({ block: "nearest" });
  return li;
}

function fill(li, selector, text) { li.querySelector(selector).textContent = text; }

function showUnderstanding(li, u) {
  const confidence = typeof u.confidence === "number" ? ` ${Math.round(u.confidence * 100)}%` : "";
  fill(li, ".intent", `${u.intent}${confidence}${u.path ? ` (${u.path})` : ""}`);
  const entities = li.querySelector(".entities");
  entities.replaceChildren();
  for (const [name, value] of Object.entries(u.entities || {})) {
    const chip = document.createElement("span");
    chip.className = "entity";
    chip.textContent = `${name}: ${describe(value)}`;
    entities.append(chip);
  }
  if (u.ambiguity_reason) {
    const chip = document.createElement("span");
    chip.className = "entity warn";
    chip.textContent = `unclear: ${u.ambiguity_reason}`;
    entities.append(chip);
  }
}

function describe(value) {
  if (value === null || value === undefined) return "–";
  if (Array.isArray(value)) return value.map(describe).join(", ");
  if (typeof value === "object") {
    if ("id" in value && "score" in value) return `${value.id} (${value.score})`;
    if ("minor" in value && "currency" in value) return money(value.minor, value.currency);
    return Object.entries(value).map(([k, v]) => `${k} ${describe(v)}`).join(", ");
  }
  return String(value);
}

// Money is integer minor units and an ISO 4217 code (JPY has none: 5000 is 5,000 yen).
function money(minor, currency) {
  try {
    const format = new Intl.NumberFormat(undefined, { style: "currency", currency });
    const digits = format.resolvedOptions().maximumFractionDigits;
    return format.format(minor / 10 ** digits);
  } catch {
    return `${minor} ${currency} (minor units)`;
  }
}

// --- controls -------------------------------------------------------------------------

ui.form.addEventListener("submit", (event) => { event.preventDefault(); startCall(); });
ui.hangup.addEventListener("click", hangUp);
ui.confirm.addEventListener("click", () => typed("yes"));
ui.cancel.addEventListener("click", () => typed("no"));
ui.textForm.addEventListener("submit", (event) => {
  event.preventDefault();
  if (ui.text.value.trim()) typed(ui.text.value.trim());
  ui.text.value = "";
});

function typed(text) {
  ui.confirmBar.classList.remove("pending");
  send({ type: "input_text", text });
}
