from agent.audio.endpointer import Endpointer, EndpointerConfig, SpeechStarted, SpeechStopped

W = 512  # one VAD window


def run(probabilities: list[float], endpointer: Endpointer | None = None) -> list[object]:
    endpointer = endpointer or Endpointer(
        EndpointerConfig(silence_ms=320, min_speech_ms=64, speech_pad_ms=32)
    )
    out: list[object] = []
    for i, p in enumerate(probabilities):
        out += endpointer.feed(p, i * W, W)
    return out


def test_start_is_backdated_and_end_is_first_silent_sample() -> None:
    # 5 silent windows, 10 speech windows, 12 silent windows (320 ms = 10 windows).
    events = run([0.0] * 5 + [0.9] * 10 + [0.0] * 12)
    assert events == [SpeechStarted(5 * W - 512), SpeechStopped(5 * W - 512, 15 * W)]


def test_a_click_shorter_than_min_speech_never_starts() -> None:
    assert run([0.0, 0.9, 0.0, 0.0, 0.9, 0.0] + [0.0] * 20) == []


def test_pauses_shorter_than_the_silence_do_not_end_the_turn() -> None:
    events = run([0.9] * 5 + [0.0] * 6 + [0.9] * 5 + [0.0] * 12)
    assert len(events) == 2
    assert events[1] == SpeechStopped(0, 16 * W)


def test_hysteresis_keeps_the_turn_open_between_thresholds() -> None:
    # 0.4 is below the start threshold but above threshold - 0.15: still speech.
    events = run([0.9] * 4 + [0.4] * 20 + [0.0] * 12)
    assert events[-1] == SpeechStopped(0, 24 * W)


def test_silence_can_be_shortened_while_the_turn_is_open() -> None:
    endpointer = Endpointer(EndpointerConfig(silence_ms=1000, min_speech_ms=64, speech_pad_ms=0))
    events = run([0.9] * 5, endpointer)
    endpointer.silence_ms = 160  # the partial is a complete command
    events += run([0.0] * 6, endpointer)  # offsets restart, only the decision matters
    assert isinstance(events[-1], SpeechStopped)
    assert endpointer.silence_ms == 1000  # reset for the next turn


def test_max_utterance_forces_a_stop() -> None:
    endpointer = Endpointer(EndpointerConfig(max_utterance_s=1.0, min_speech_ms=32))
    events = run([0.9] * 40, endpointer)  # 1.28 s of continuous speech
    stops = [e for e in events if isinstance(e, SpeechStopped)]
    assert len(stops) == 1 and stops[0].forced
    assert stops[0].end_sample - stops[0].start_sample <= 16_000 + W
    assert isinstance(events[-1], SpeechStarted)  # what follows is a new turn


def test_flush_closes_an_open_utterance() -> None:
    endpointer = Endpointer(EndpointerConfig(min_speech_ms=32, speech_pad_ms=0))
    run([0.9] * 3, endpointer)
    assert endpointer.flush(5000) == [SpeechStopped(0, 5000)]
    assert endpointer.flush(6000) == []
