import storeprobe


def test_all_matches_public_names() -> None:
    public = {name for name in vars(storeprobe) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(storeprobe, name)).__name__ == "module"}
    assert set(storeprobe.__all__) - {"__version__"} == public - modules - {
        "annotations",
        "importlib",
    }
    assert storeprobe.__all__ == sorted(storeprobe.__all__, key=lambda n: (not n.isupper(), n))


def test_version() -> None:
    assert storeprobe.__version__
