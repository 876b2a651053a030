"""One browser call, for tests/test_widget_e2e.py: run inside a network namespace.

Starts the real server (clients.local_server), opens the widget in headless Chromium with
a speech fixture as the microphone (Chromium's fake capture device), presses Call, waits
until the page shows the reply, optionally presses Confirm, and prints what the page
shows as one JSON object on stdout. A screenshot and the server's log go to --artifacts.

    unshare -n python tests/widget_session.py --wav tests/fixtures/speech/transfer_01.wav \
        --artifacts test-artifacts/widget

It refuses to run where any network interface but ``lo`` exists (outside a namespace of
its own), brings ``lo`` up itself, and every socket it opens is on 127.0.0.1 there.
"""

from __future__ import annotations

import argparse
import fcntl
import socket
import struct
import sys
import tempfile
import time
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from clients.local_server import LocalServer  # noqa: E402
from protocol.codecs import resample  # noqa: E402

# The fake capture device starts with getUserMedia, before the peer connection is up:
# lead-in silence keeps the speech for after it connects; the tail keeps the file from
# looping (Chromium repeats it) while the test is still reading the page.
LEAD_S = 4.0
TAIL_S = 40.0

CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
    "--allow-loopback-in-peer-connection",
    "--autoplay-policy=no-user-gesture-required",
    "--window-size=1000,1300",
)

READ_TURN = """
const li = document.querySelector(`#turns li[data-turn="${arguments[0]}"]`);
if (!li) return null;
const text = (sel) => li.querySelector(sel).textContent.trim();
return {
  state: li.dataset.state || "", transcript: text(".transcript"), intent: text(".intent"),
  entities: [...li.querySelectorAll(".entity")].map((e) => e.textContent.trim()),
  reply: text(".reply"), latency: text(".latency"),
};
"""

# How much of the spoken reply reached the browser: WebRTC's own receive statistics.
READ_AUDIO_STATS = """
const done = arguments[arguments.length - 1];
if (typeof call === "undefined" || !call || !call.pc) { done(null); return; }
call.pc.getStats().then((stats) => {
  let out = null;
  stats.forEach((s) => {
    if (s.type === "inbound-rtp" && s.kind === "audio") {
      out = { packets: s.packetsReceived, energy: s.totalAudioEnergy || 0,
              duration: s.totalSamplesDuration || 0 };
    }
  });
  done(out);
});
"""


def isolate_to_loopback() -> None:
    """Check that this is a network namespace with nothing but ``lo``, and bring it up
    (SIOCSIFFLAGS, what ``ip link set lo up`` does)."""
    names = [name for _, name in socket.if_nameindex()]
    if names != ["lo"]:
        raise SystemExit(f"run me inside 'unshare -n' (interfaces here: {names})")
    get_flags, set_flags, up = 0x8913, 0x8914, 0x1  # SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, get_flags, request))[1]
        fcntl.ioctl(sock, set_flags, struct.pack("16sh", b"lo", flags | up))


def microphone_file(fixtures: list[Path], gap_s: float, out: Path) -> Path:
    """The fixtures (16 kHz mono), gap_s apart, as one 48 kHz mono WAV with silence
    around them."""

    def silence(seconds: float) -> np.ndarray:
        return np.zeros(int(seconds * 48_000), "<i2")

    parts = [silence(LEAD_S)]
    for i, fixture in enumerate(fixtures):
        with wave.open(str(fixture)) as wav:
            speech = np.frombuffer(wav.readframes(wav.getnframes()), dtype="<i2")
            rate = wav.getframerate()
        parts += [silence(gap_s)] if i else []
        parts.append(resample(speech, rate, 48_000).astype("<i2"))
    parts.append(silence(TAIL_S))
    with wave.open(str(out), "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(2)
        wav.setframerate(48_000)
        wav.writeframes(np.concatenate(parts).tobytes())
    return out


def wait_for(predicate: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError(f"the page did not show {what} within {timeout_s:g} s")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--wav", type=Path, required=True, action="append", help="repeatable")
    parser.add_argument("--gap-s", type=float, default=3.0, help="silence between the wavs")
    parser.add_argument("--artifacts", type=Path, required=True)
    parser.add_argument("--confirm", action="store_true", help="press Confirm after turn 1")
    parser.add_argument(
        "--headphones", action="store_true", help="untick Echo cancellation before calling"
    )
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--chromedriver", default="/usr/bin/chromedriver")
    args = parser.parse_args()
    isolate_to_loopback()

    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    args.artifacts.mkdir(parents=True, exist_ok=True)
    result: dict = {"turns": {}}
    with tempfile.TemporaryDirectory(prefix="widget-") as tmp:
        mic = microphone_file(args.wav, args.gap_s, Path(tmp) / "mic.wav")
        options = webdriver.ChromeOptions()
        options.binary_location = args.chromium
        for flag in CHROMIUM_FLAGS:
            options.add_argument(flag)
        options.add_argument(f"--use-file-for-fake-audio-capture={mic}")
        options.add_argument(f"--user-data-dir={Path(tmp) / 'profile'}")
        # A bank of its own: Confirm really moves money.
        server = LocalServer("--bank.path", str(Path(tmp) / "bank.sqlite3")).start()
        driver = None
        try:
            driver = webdriver.Chrome(
                options=options,
                service=Service(
                    args.chromedriver, log_output=str(args.artifacts / "chromedriver.log")
                ),
            )
            driver.set_script_timeout(10)
            driver.get(server.http_url + "/")
            result["title"] = driver.title
            if args.headphones:
                driver.find_element(By.ID, "echo").click()
            driver.find_element(By.ID, "call").click()

            def turn(number: int) -> dict | None:
                return driver.execute_script(READ_TURN, number)

            def error() -> str:
                return driver.find_element(By.ID, "error").text

            def finished(number: int) -> dict | None:
                if error():
                    raise RuntimeError(f"the page shows an error: {error()}")
                shown = turn(number)
                return shown if shown and shown["state"] in ("done", "cancelled") else None

            result["turns"]["1"] = wait_for(lambda: finished(1), 30, "the reply to turn 1")
            result["status"] = driver.find_element(By.ID, "status").text
            result["confirm_pending"] = "pending" in driver.find_element(
                By.ID, "confirm-bar"
            ).get_attribute("class")
            if args.confirm:
                driver.find_element(By.ID, "confirm").click()
                result["turns"]["2"] = wait_for(lambda: finished(2), 15, "the reply to Confirm")
            for number in range(2, len(args.wav) + 1):  # the later utterances
                result["turns"][str(number)] = wait_for(
                    lambda n=number: finished(n), 30, f"the reply to turn {number}"
                )
            time.sleep(1.5)  # let the spoken reply play for a moment
            result["audio"] = driver.execute_async_script(READ_AUDIO_STATS)
            driver.save_screenshot(str(args.artifacts / "widget.png"))
            result["error"] = error()
            driver.find_element(By.ID, "hangup").click()
            wait_for(
                lambda: not driver.find_element(By.ID, "call").get_attribute("disabled"),
                20,
                "the call ending",
            )
            result["status_after_hangup"] = driver.find_element(By.ID, "status").text
        except Exception as exc:
            result["failure"] = f"{type(exc).__name__}: {exc}"
            if driver is not None:
                driver.save_screenshot(str(args.artifacts / "widget-failure.png"))
        finally:
            if driver is not None:
                driver.quit()
            server.stop()
            (args.artifacts / "server.log").write_text(server.log_text())
            result["webrtc_states"] = [r.get("state") for r in server.events("webrtc_state")]
            result["interrupted"] = [
                {"turn": r.get("turn"), "heard": r.get("heard")}
                for r in server.events("reply_interrupted")
            ]
            result["webrtc_audio_frames"] = [
                r.get("frames") for r in server.events("webrtc_audio_ended")
            ]
    print(orjson.dumps(result).decode())
    return 1 if "failure" in result else 0


if __name__ == "__main__":
    sys.exit(main())
