def test_rate_bar_shows_the_windows_own_rate_in_1024_units() -> None:
    """Each repeat's window restarts the rate; sizes and rates are KiB/MiB, never MB."""
    import io

    from storeprobe.progress import RateBar

    now = [0.0]
    out = io.StringIO()
    bar = RateBar(file=out, clock=lambda: now[0], mininterval=0)
    bar.start("upload large")
    for repeat in range(2):
        now[0] += 30.0  # untimed work between repeats (payload, verification): not counted
        bar.set_size(1150 * 2**20)
        now[0] += 0.5
        bar.absolute_update(575 * 2**20)
        assert bar.rate_text == "1.123 GiB/s", repeat
        now[0] += 0.5
        bar.absolute_update(1150 * 2**20)
        assert bar.rate_text == "1.123 GiB/s", repeat
        now[0] += 0.1  # the pump's last, unchanged update moves no clock
        bar.absolute_update(1150 * 2**20)
        assert bar.rate_text == "1.123 GiB/s", repeat
    bar.close()
    drawn = out.getvalue()
    assert "1.123 GiB/s" in drawn
    assert "1.12 GiB" in drawn  # 1150 MiB, 1024-based
    assert "MB" not in drawn
    assert "upload large" in drawn
