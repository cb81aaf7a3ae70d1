"""Data files as hostile input (issue 21): each class of attack, crafted for real, gives a
DatasetError naming the file (one line at the CLI, exit 1, nothing recorded), never a crash, a
traceback, a hang or an allocation of what the file declares. The property-based tests over
arbitrary and mutated files are in test_hostile_data_properties.py."""

from __future__ import annotations

import io
import os
import pickle
import struct
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from orchestrator.config.run_config import RunConfig
from orchestrator.errors import DatasetError
from orchestrator.provision import datasets
from orchestrator.provision.datafiles import Limits, images, npz, pickles
from tests import hostile_files as h
from tests.conftest import bench_command

REPO = Path(__file__).resolve().parent.parent
SMALL = Limits(max_bytes=1 << 20, max_image_pixels=1_000_000, max_folder_entries=100)
GIB = 1 << 30


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_DATA_CACHE", str(tmp_path / "cache"))


def u1_array(payload: bytes, shape: tuple[int, ...]) -> bytes:
    return h.array(shape, h.dtype("u1"), h.py2str(payload))


# --- CIFAR pickles

SHARED_LISTS = b"]K\x00aq\x00" + b"".join(b"](h%ch%cq%ce" % (i, i, i + 1) for i in range(40))
SHARED_TUPLES = b"K\x00\x85q\x00" + b"".join(b"h%ch%c\x86q%c" % (i, i, i + 1) for i in range(40))
DEEP = b"]" * 100_000 + b"a" * 99_999

HOSTILE_PICKLES = {
    # numpy's dtype state can clear the flag that makes object arrays come from a list, so that raw
    # bytes become object pointers: plain pickle.load of this dies with SIGSEGV
    "object dtype from raw bytes": (
        h.cifar_dict(h.array((2,), h.dtype("O8", flags=61), h.py2str(b"A" * 16))),
        "object array",
    ),
    "void dtype claiming objects": (
        h.cifar_dict(h.array((2,), h.dtype("V8", flags=61), h.py2str(b"A" * 16))),
        "dtype 'V8'",
    ),
    "structured dtype": (
        h.cifar_dict(h.array((2,), h.dtype("u1", middle=b"N(U\x01at}"), h.py2str(b"AA"))),
        "fields",
    ),
    "lists shared 2^40 times": (h.cifar_dict(SHARED_LISTS), "share no containers"),
    "tuples shared 2^40 times": (h.cifar_dict(SHARED_TUPLES), "share no containers"),
    "lists nested 100,000 deep": (h.cifar_dict(DEEP), "nested more than 16 deep"),
    "bytes declaring 2^60": (h.cifar_dict(b"\x8e" + struct.pack("<Q", 1 << 60)), "more than bench's limit"),
    "shape declaring 10^12": (
        h.cifar_dict(u1_array(b"x" * 8, (1_000_000, 1_000_000))),
        "not 1,000,000,000,000 bytes",
    ),
    "os.system": (
        h.cifar_dict(h.glob("os", "system") + b"(" + h.text("true") + b"tR"),
        "refused to load os.system",
    ),
    "builtins.eval by STACK_GLOBAL": (
        b"\x80\x04" + h.text("builtins") + h.text("eval") + b"\x93.",
        "refused to load builtins.eval",
    ),
    "a DUP": (h.cifar_dict(b"]2a"), "opcode b'2'"),
    "a persistent id": (h.cifar_dict(h.text("x") + b"Q"), "opcode b'Q'"),
    "an out-of-band buffer": (h.cifar_dict(b"\x97"), "opcode b'\\x97'"),
    "a BUILD on a dict": (h.cifar_dict(b"}(K\x01K\x02tb"), "BUILD of something other"),
    "an unfinished array as data": (
        h.cifar_dict(
            b"]("
            + h.glob("numpy.core.multiarray", "_reconstruct")
            + h.glob("numpy", "ndarray")
            + b"K\x00\x85U\x01b\x87Re"
        ),
        "unfinished array",
    ),
    "a list as a dict key": (b"\x80\x02}]K\x01s.", "dict key of type list"),
    "truncated": (
        h.cifar_dict(u1_array(b"\0" * 3072, (1, 3072)))[:200],
        "declares 3,072 bytes where 69 remain",
    ),
    "bytes after STOP": (h.cifar_dict(u1_array(b"\0" * 3072, (1, 3072))) + b"junk", "4 bytes follow"),
}


@pytest.mark.parametrize("name", HOSTILE_PICKLES)
def test_a_hostile_pickle_is_refused_naming_the_file(tmp_path, name):
    payload, why = HOSTILE_PICKLES[name]
    path = tmp_path / "data_batch_1"
    path.write_bytes(payload)
    with pytest.raises(DatasetError) as caught:
        pickles.load(path, datasets.limits(), "not a cifar10 python-pickle batch")
    message = str(caught.value)
    assert message.startswith(f"{path}: not a cifar10 python-pickle batch: ") and why in message, message
    assert "\n" not in message


def test_the_published_cifar_format_loads_as_pickle_loads_it(tmp_path):
    """A batch written opcode for opcode as Python 2's cPickle wrote CIFAR's (SHORT_BINSTRING and
    BINSTRING for str, numpy.core.multiarray._reconstruct, a version-3 dtype state) reads as the
    standard library reads it, and decodes into the cached dataset."""
    rng = np.random.RandomState(0)
    data = rng.randint(0, 256, (12, 3072)).astype(np.uint8)
    labels = [int(v) for v in rng.randint(0, 10, 12)]
    payload = h.py2_cifar_batch(data, labels)
    expected = pickle.loads(payload, encoding="bytes")
    got = pickles.loads(payload, datasets.limits())
    assert isinstance(got, dict) and got.keys() == expected.keys()
    assert got[b"data"].dtype == np.uint8 and (got[b"data"] == expected[b"data"]).all()
    assert got[b"labels"] == labels and got[b"filenames"] == expected[b"filenames"]
    root = tmp_path / "cifar"
    root.mkdir()
    for name in datasets.CIFAR_FILES["cifar10"][0]:
        (root / name).write_bytes(payload)
    cfg = RunConfig(framework="pytorch", dataset="cifar10", data_dir=str(root), image_size=32, classes=10)
    with np.load(datasets.prepare(cfg)) as cached:
        assert cached["x"].shape == (60, 3, 32, 32) and (cached["x"][0].reshape(-1) == data[0]).all()
        assert cached["y"].tolist() == labels * 5


@pytest.mark.parametrize(
    "payload, why",
    [
        (h.cifar_dict(u1_array(b"\0" * 3072, (1, 3072)), labels=[10]), "labels from 0 to 9"),
        (h.cifar_dict(u1_array(b"\0" * 3072, (1, 3072)), labels=[1, 2]), "not 1 labels"),
        (h.cifar_dict(u1_array(b"\0" * 100, (1, 100)), labels=[1]), r"not a uint8 \(N, 3072\) array"),
        (h.cifar_dict(h.array((1, 384), h.dtype("i8", "<"), h.py2str(b"\0" * 3072)), labels=[1]), "uint8"),
        (b"\x80\x02]K\x01a.", "no dict with"),
    ],
)
def test_a_pickle_of_plain_data_that_is_not_a_cifar_batch_is_refused(tmp_path, payload, why):
    root = tmp_path / "cifar"
    root.mkdir()
    for name in datasets.CIFAR_FILES["cifar10"][0]:
        (root / name).write_bytes(payload)
    cfg = RunConfig(framework="pytorch", dataset="cifar10", data_dir=str(root), image_size=32, classes=10)
    with pytest.raises(DatasetError, match=why) as caught:
        datasets.prepare(cfg)
    assert str(root / "data_batch_1") in str(caught.value)


def test_the_object_array_that_crashed_numpy_cannot_crash_bench(tmp_path):
    """The crafted pickle, in a subprocess so that a regression fails this test instead of killing
    pytest: plain pickle.load dies with SIGSEGV, bench's reader reports it."""
    path = tmp_path / "data_batch_1"
    path.write_bytes(HOSTILE_PICKLES["object dtype from raw bytes"][0])
    crash = "import pickle, sys; print(pickle.load(open(sys.argv[1], 'rb'))[b'data'])"
    plain = subprocess.run([sys.executable, "-c", crash, str(path)], capture_output=True, timeout=60)
    assert plain.returncode != 0, plain  # the attack is real: numpy 2.4 dies of SIGSEGV (-11)
    read = (
        "import sys; from orchestrator.provision import datasets\n"
        "try:\n    datasets.load_data_pickle(sys.argv[1])\n"
        "except datasets.DatasetError as exc:\n    print(exc)\n"
    )
    ours = subprocess.run(
        [sys.executable, "-c", read, str(path)], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    assert ours.returncode == 0 and "object array" in ours.stdout, ours


# --- images


@pytest.fixture
def photos(tmp_path) -> Path:
    root = tmp_path / "photos"
    for name in ("fire", "smoke"):
        (root / name).mkdir(parents=True)
        for i in range(3):
            (root / name / f"ok{i}.png").write_bytes(h.png())
    return root


def broken_jpeg() -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (64, 64), (9, 90, 200)).save(buf, "JPEG")
    return buf.getvalue()[:300]


HOSTILE_IMAGES = {
    "a real 30000 x 30000 PNG bomb (110 KB)": (h.png_bomb, "DecompressionBombError"),
    "a header claiming 9000 x 9000 (above bench's limit, under Pillow's)": (
        lambda: h.with_ihdr_size(h.png(), 9000, 9000),
        "limit of 64,000,000",
    ),
    "a header claiming 9500 x 9500 (past Pillow's warning)": (
        lambda: h.with_ihdr_size(h.png(), 9500, 9500),
        "could be decompression bomb",
    ),
    "a truncated JPEG": (broken_jpeg, "(?i)truncated"),
    "a PNG with a broken chunk": (
        lambda: h.png()[:40] + b"\xff" * 20 + h.png()[60:],
        "cannot decode the image",
    ),
    "random bytes": (lambda: os.urandom(500), "cannot decode the image"),
    "PostScript named .png": (
        lambda: b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n",
        "cannot identify",
    ),
    "an empty file": (lambda: b"", "cannot decode the image"),
}


@pytest.mark.parametrize("name", HOSTILE_IMAGES)
def test_a_hostile_image_is_a_data_error_naming_it(photos, name):
    make, why = HOSTILE_IMAGES[name]
    bad = photos / "smoke" / "bad.png"
    bad.write_bytes(make())
    cfg = RunConfig(framework="pytorch", dataset="image_folder", data_dir=str(photos), classes=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # Pillow's bomb warning included: nothing may leak out as one
        with pytest.raises(DatasetError, match=why) as caught:
            datasets.prepare(cfg)
    assert str(caught.value).startswith(f"{bad}: ") and "\n" not in str(caught.value)


def test_links_loops_fifos_and_devices_do_not_hang_the_listing(photos):
    (photos / "fire" / "loop").symlink_to(photos / "fire")
    (photos / "fire" / "up").symlink_to(photos)
    (photos / "smoke" / "deeper").mkdir()
    (photos / "smoke" / "deeper" / "again").symlink_to(photos / "smoke")
    (photos / "smoke" / "deeper" / "more.png").write_bytes(h.png())
    os.mkfifo(photos / "fire" / "waits.png")
    (photos / "fire" / "zeros.png").symlink_to("/dev/zero")
    (photos / "fire" / "nowhere.png").symlink_to(photos / "missing.png")
    (photos / "linked_class").symlink_to(photos / "fire")  # a class folder that is a link is a class
    found = images.list_images(photos, SMALL)
    names = sorted(f"{c}/{f.relative_to(photos)}" for c, f in found)
    assert names == sorted(
        [f"fire/fire/ok{i}.png" for i in range(3)]
        + [f"linked_class/linked_class/ok{i}.png" for i in range(3)]
        + [f"smoke/smoke/ok{i}.png" for i in range(3)]
        + ["smoke/smoke/deeper/more.png"]
    )


def test_a_folder_past_the_entry_limit_is_refused_without_listing_it_all(tmp_path):
    """SMALL allows 100 entries; the default, a million, is the same code at a size a test cannot make."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for i in range(60):
            (tmp_path / name / f"{i}.txt").touch()
    with pytest.raises(DatasetError, match="more than 100 files and folders"):
        images.list_images(tmp_path, SMALL)


def test_decoded_images_larger_than_the_limit_are_refused_before_decoding(photos):
    files = [f for _, f in images.list_images(photos, SMALL)]
    with pytest.raises(DatasetError, match=r"6 decoded images would take 1,179,648 bytes"):
        images.decode_all(photos, files, 256, SMALL)


# --- .npz


class RunsCode:
    def __reduce__(self):
        return (os.system, ("true",))


def imdb_zip(
    path: Path, replace: dict[str, bytes] | None = None, extra: list[tuple[str, bytes]] | None = None
) -> Path:
    members = {**h.imdb_members(), **(replace or {})}
    return h.write_zip(path, list(members.items()) + (extra or []))


KINDS = {"x_train": "object", "y_train": "int", "x_test": "object", "y_test": "int"}


def test_keras_imdb_layout_is_read(tmp_path):
    path = imdb_zip(tmp_path / "imdb.npz")
    with np.load(path, allow_pickle=True) as reference:
        got = npz.read_members(path, SMALL, KINDS)
        for name, kind in KINDS.items():
            if kind == "object":
                assert got[name] == list(reference[name])
            else:
                assert (got[name] == reference[name]).all()


def lying(path: Path) -> Path:
    """y_train's header declares 10^12 int64 labels (8 TB) for 8 bytes of data."""
    return imdb_zip(
        path,
        {
            "y_train.npy": h.npy(
                "{'descr': '<i8', 'fortran_order': False, 'shape': (1000000000000,), }", b"\0" * 8
            )
        },
    )


def bomb(path: Path) -> Path:
    """A real zip bomb member: 64 MiB of zeros deflated to 64 KiB, declared honestly."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for name, data in h.imdb_members().items():
            if name != "y_test.npy":
                out.writestr(name, data)
        with out.open("y_test.npy", "w") as member:
            member.write(h.npy("{'descr': '<i8', 'fortran_order': False, 'shape': (8388608,), }", b""))
            for _ in range(64):
                member.write(bytes(1 << 20))
    path.write_bytes(archive.getvalue())
    return path


def declared_huge(path: Path) -> Path:
    """y_test's zip headers declare 4 GB for its few bytes."""
    data = imdb_zip(path).read_bytes()
    path.write_bytes(h.patch_declared_size(data, "y_test.npy", 0xFFFFFFF0))
    return path


HOSTILE_ARCHIVES = {
    "a header declaring 10^12 elements": (lying, "declares (1000000000000,) of <i8 but holds 8 bytes"),
    "a zip bomb over the limit": (bomb, "member y_test.npy: its data would take 67,108,992 bytes"),
    "a member declaring more than deflate can give": (declared_huge, "declares 4,294,967,280 bytes"),
    "a duplicate member": (lambda p: imdb_zip(p, extra=[("y_test.npy", b"")]), "appears twice"),
    "a member with a path": (
        lambda p: imdb_zip(p, extra=[("../x_train.npy", b"")]),
        "a member named '../x_train.npy'",
    ),
    "an extra member": (lambda p: imdb_zip(p, extra=[("evil.npy", b"")]), "evil.npy is not one of"),
    "a missing member": (
        lambda p: h.write_zip(p, list(h.imdb_members().items())[:3]),
        "no member y_test.npy",
    ),
    "object labels": (
        lambda p: imdb_zip(p, {"y_train.npy": h.imdb_members()["x_train.npy"]}),
        "an integer array belongs there",
    ),
    "float labels": (
        lambda p: imdb_zip(p, {"y_train.npy": h.npy_of(np.zeros(6))}),
        "an integer array belongs there",
    ),
    "structured labels": (
        lambda p: imdb_zip(p, {"y_train.npy": h.npy_of(np.zeros(6, "i4,i4"))}),
        "header of the wrong types",
    ),
    "void labels": (
        lambda p: imdb_zip(
            p, {"y_train.npy": h.npy("{'descr': '|V8', 'fortran_order': False, 'shape': (6,), }", b"A" * 48)}
        ),
        "an integer array belongs there",
    ),
    "a header that is code": (
        lambda p: imdb_zip(p, {"y_train.npy": h.npy("__import__('os').system('true')", b"")}),
        "a header other than",
    ),
    "a header of 60,000 bytes": (
        lambda p: imdb_zip(p, {"y_train.npy": h.npy("{" * 60000, b"", version=2)}),
        "header of 60,",
    ),
    "not an npy": (lambda p: imdb_zip(p, {"y_train.npy": b"PK not numpy"}), "not an .npy array"),
    "reviews that run code": (
        lambda p: imdb_zip(p, {"x_train.npy": h.npy_of(np.array([RunsCode()], dtype=object))}),
        "refused to load",
    ),
    "reviews of raw bytes": (
        lambda p: imdb_zip(
            p, {"x_train.npy": h.npy("{'descr': '|O', 'fortran_order': False, 'shape': (6,), }", b"A" * 48)}
        ),
        "object member holds",
    ),
    "a corrupt archive": (
        lambda p: (p.write_bytes(imdb_zip(p).read_bytes()[:-30]), p)[1],
        "not a readable .npz archive",
    ),
}


@pytest.mark.parametrize("name", HOSTILE_ARCHIVES)
def test_a_hostile_npz_is_refused_naming_the_file(tmp_path, name):
    make, why = HOSTILE_ARCHIVES[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of the duplicate name it is told to write
        path = make(tmp_path / "imdb.npz")
    limits = Limits(max_bytes=32 << 20)
    with pytest.raises(DatasetError) as caught:
        npz.read_members(path, limits, KINDS)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and why in message and "\n" not in message, message


# --- declared sizes never become allocations: the readers under an address-space limit

UNDER_RLIMIT = """
import resource, sys
from pathlib import Path
from orchestrator.provision import datasets
from orchestrator.config.run_config import RunConfig
from orchestrator.provision.datafiles import images, npz, pickles
from orchestrator.errors import DatasetError
limits = datasets.limits()
assert limits.max_bytes > 2 ** 30  # the default limits, far beyond the room below
used = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (used + 256 * 2 ** 20,) * 2)
kinds = {"x_train": "object", "y_train": "int", "x_test": "object", "y_test": "int"}
readers = {
    "pickle": lambda p: pickles.load(p, limits, "a batch"),
    "npz": lambda p: npz.read_members(p, limits, kinds),
    "image": lambda p: images.decode(p, 32, limits),
}
for kind, path in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        readers[kind](Path(path))
    except DatasetError as exc:
        print("refused", exc)
    else:
        print("read", path)
"""


def test_declared_sizes_are_checked_before_anything_is_allocated(tmp_path):
    """Every hostile file declaring gigabytes or more, read with the default limits (8 GiB or half
    the memory) in a process allowed only 256 MiB more address space than it has: a MemoryError,
    or a kill, would mean a size reached an allocation before its check."""
    args = []
    for name in (
        "lists shared 2^40 times",
        "tuples shared 2^40 times",
        "bytes declaring 2^60",
        "shape declaring 10^12",
    ):
        path = tmp_path / name.replace(" ", "_")
        path.write_bytes(HOSTILE_PICKLES[name][0])
        args += ["pickle", str(path)]
    for name, make in (("lying", lying), ("declared", declared_huge)):
        args += ["npz", str(make(tmp_path / name / "imdb.npz"))]
    (tmp_path / "bomb.png").write_bytes(h.png_bomb())
    args += ["image", str(tmp_path / "bomb.png")]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", UNDER_RLIMIT, *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(args) // 2 and all(line.startswith("refused ") for line in lines), done.stdout


# --- at the CLI: one line, exit 1, nothing recorded


def cifar_folder(root: Path, hostile: bytes) -> None:
    root.mkdir()
    for name in datasets.CIFAR_FILES["cifar10"][0]:
        (root / name).write_bytes(h.py2_cifar_batch(np.zeros((4, 3072), np.uint8), [1, 2, 3, 4]))
    (root / "data_batch_3").write_bytes(hostile)


CLI_CASES = {
    "shared lists": (
        "cifar10",
        lambda d: cifar_folder(d / "data", HOSTILE_PICKLES["lists shared 2^40 times"][0]),
        "data/data_batch_3",
    ),
    "png bomb": ("image_folder", lambda d: images_with(d / "data", h.png_bomb()), "data/b/bomb.png"),
    "lying npy header": ("imdb", lambda d: lying(d / "data" / "imdb.npz"), "data/imdb.npz"),
    "zip bomb": ("imdb", lambda d: declared_huge(d / "data" / "imdb.npz"), "data/imdb.npz"),
}


def images_with(root: Path, bad: bytes) -> None:
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        (root / name / "ok.png").write_bytes(h.png())
    (root / "b" / "bomb.png").write_bytes(bad)


def matrix_for(dataset: str) -> str:
    model, classes = ("gru", 2) if dataset == "imdb" else ("small_cnn", 10 if dataset == "cifar10" else 2)
    settings = f"model: {model}, dataset: {dataset}, data_dir: data, classes: {classes}"
    return f"settings: {{{settings}, dataset_size: 2, batch_size: 1}}\n"


@pytest.mark.parametrize("name", CLI_CASES)
def test_bench_run_on_hostile_data_is_one_line_and_records_nothing(name, write_matrix, cli, workdir):
    dataset, make, where = CLI_CASES[name]
    make(workdir)
    write_matrix(matrix_for(dataset))
    result = cli("run", "--matrix", "m.yaml")
    assert result.exit_code == 1, result.output
    line = result.output.strip()
    assert "\n" not in line and "Traceback" not in line and line.startswith("error: "), line
    assert str(workdir / where) in line
    assert not (workdir / "bench.db").exists() and not (workdir / "bench-runs").exists()


def test_bench_run_on_the_segfault_pickle_is_one_line_in_a_real_process(workdir):
    """The SIGSEGV pickle through the real CLI in its own process: exit 1 and one line, not a signal."""
    cifar_folder(workdir / "data", HOSTILE_PICKLES["object dtype from raw bytes"][0])
    (workdir / "m.yaml").write_text(matrix_for("cifar10"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        bench_command("run", "--matrix", "m.yaml"),
        cwd=workdir,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and str(workdir / "data" / "data_batch_3") in lines[0] and "object array" in lines[0]
    ), done.stderr
    assert not (workdir / "bench.db").exists()


def test_an_unreadable_cached_copy_is_a_data_error(tmp_path, photos):
    cfg = RunConfig(
        framework="pytorch", dataset="image_folder", data_dir=str(photos), classes=2, dataset_size=4
    )
    path = datasets.prepare(cfg)
    datasets.check_fits(cfg, path)
    whole = path.read_bytes()
    names = ("classes.npy", h.npy_of(np.array(["a", "b"])))

    def cache(x: np.ndarray, y: np.ndarray) -> bytes:
        return h.zip_bytes([("x.npy", h.npy_of(x)), ("y.npy", h.npy_of(y)), names])

    for damage in (
        whole[:100],  # cut short
        cache(np.zeros((6, 3, 8, 8), np.float64), np.zeros(6, np.int64)),  # pixels of another type
        cache(np.zeros((6, 3, 8, 8), np.uint8), np.full(6, 7)),  # labels past the classes
        cache(np.array([None] * 6), np.zeros(6, np.int64)),  # an object array
    ):
        path.write_bytes(damage)
        with pytest.raises(DatasetError, match="is damaged; delete it and bench decodes the data again"):
            datasets.check_fits(cfg, path)
