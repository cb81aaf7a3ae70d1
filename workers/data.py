"""The synthetic data set: learnable, deterministic, identical in every framework's environment.

Each class has a smooth colour pattern (a random 4x4 grid per channel, bilinearly upsampled to the
image size). A sample is its class pattern scaled by a random gain, shifted by a random colour
offset, plus strong per-pixel noise: no single pixel tells the classes apart (the best pixel
classifies 10 classes at about 19%, chance being 10%), but a CNN that averages over space learns
them within a few epochs (small_cnn: above 90% validation accuracy after 3 epochs of 320 images).

numpy is imported inside the functions so that the worker core imports without it. Only
``numpy.random.RandomState`` (whose streams numpy keeps stable across versions) and exactly
rounded elementwise arithmetic are used: no transcendental functions, reductions or matrix
products, whose last bits vary with numpy's SIMD and BLAS builds (numpy 1.19 to 2.x).
"""

GRID = 4  # pattern resolution before upsampling: low-frequency, so it survives pooling
NOISE = 2.0  # per-pixel noise std; pattern values are N(0, 1) at the grid points
GAIN = (0.5, 1.5)  # per-sample contrast, uniform
OFFSET = 0.5  # per-sample, per-channel brightness std
CHUNK = 16  # samples per step: temporaries stay small (cache-friendly, 2x faster than 64)
# Noise is uniform over 256 levels: RandomState draws uint8 about 25x faster than gaussians
# (9 ms against 255 ms per 64 images at 224x224). 73.9 is the std of a uniform on 0..255.
U8_MID, U8_STD = 127.5, 73.9


def split_sizes(config):
    """(n_train, n_val): n_val = round(dataset_size * val_fraction), the rest train."""
    n = int(config["dataset_size"])
    n_val = int(round(n * float(config["val_fraction"])))
    return n - n_val, n_val


def synthetic(config):
    """Arrays x_train (N, 3, H, W) float32, y_train int64, x_val, y_val, from config['seed'].

    Uses config keys dataset_size, val_fraction, image_size, classes, seed.
    """
    import numpy as np

    n_train, n_val = split_sizes(config)
    if n_train < 1:
        raise ValueError("dataset_size {} with val_fraction {} leaves no training images".format(
            config["dataset_size"], config["val_fraction"]))
    rng = np.random.RandomState(int(config["seed"]))
    # Each class's pattern: a GRID x GRID x 3 grid of N(0, 1) values, upsampled per chunk
    # (materialising every class at full size would take gigabytes at 1000 classes).
    grid = rng.standard_normal((int(config["classes"]), 3, GRID, GRID)).astype(np.float32)
    axis = _upsample_axis(np, int(config["image_size"]))
    x_train, y_train = _samples(np, rng, grid, axis, n_train)
    x_val, y_val = _samples(np, rng, grid, axis, n_val)
    return {"x_train": x_train, "y_train": y_train, "x_val": x_val, "y_val": y_val}


def _upsample_axis(np, size):
    """Bilinear (half-pixel centres) interpolation from GRID to size points: for each output
    point its two source indices and their float32 weights."""
    pos = (np.arange(size, dtype=np.float64) + 0.5) * (float(GRID) / size) - 0.5
    pos = np.clip(pos, 0.0, GRID - 1.0)
    low = np.floor(pos).astype(np.int64)
    high = np.minimum(low + 1, GRID - 1)
    w_high = (pos - low).astype(np.float32)
    return low, high, np.float32(1.0) - w_high, w_high


def _add_patterns(np, out, small, axis, scratch):
    """out += (m, 3, GRID, GRID) patterns upsampled to out's (m, 3, size, size).

    Columns first, on the small grid; the full-size step then gathers whole contiguous rows
    into a reused scratch buffer (gathering along the last axis, or allocating temporaries per
    chunk, made generation 2 to 4 times slower).
    """
    low, high, w_low, w_high = axis
    cols = small[:, :, :, low] * w_low + small[:, :, :, high] * w_high  # (m, 3, GRID, size)
    for rows, weight in ((low, w_low), (high, w_high)):
        np.take(cols, rows, axis=2, out=scratch)
        scratch *= weight[:, None]
        out += scratch


def _samples(np, rng, grid, axis, n):
    """n samples with balanced, shuffled labels, all arithmetic in float32.

    Scalars are explicit np.float32 so numpy 1.x (value-based casting) and 2.x (NEP 50)
    pick the same float32 loops.
    """
    classes, channels, size = grid.shape[0], grid.shape[1], axis[0].shape[0]
    labels = np.arange(n, dtype=np.int64) % classes
    rng.shuffle(labels)
    gain = rng.uniform(GAIN[0], GAIN[1], n).astype(np.float32)
    offset = rng.normal(0.0, OFFSET, (n, channels)).astype(np.float32)
    x = np.empty((n, channels, size, size), dtype=np.float32)
    scratch = np.empty((CHUNK, channels, size, size), dtype=np.float32)
    for start in range(0, n, CHUNK):
        end = min(start + CHUNK, n)
        out = x[start:end]
        out[...] = rng.randint(0, 256, out.shape, dtype=np.uint8)
        out -= np.float32(U8_MID)
        out *= np.float32(NOISE / U8_STD)
        # gain and offset commute with the interpolation, so apply them on the small grid
        small = grid[labels[start:end]] * gain[start:end, None, None, None]
        small += offset[start:end, :, None, None]
        _add_patterns(np, out, small, axis, scratch[:end - start])
    return x, labels


# Synthetic token sequences (the recurrent models): each class owns a pool of marker words; a
# sequence is background words drawn uniformly from the vocabulary, with MARKERS of its positions
# holding words of its class's pool and CONFUSERS words of another class's pool. No single token
# decides the class, but counting markers over the sequence does, which a GRU learns in a few
# epochs. Lengths vary (pre-padded with 0, as Keras pads IMDB) so padding is exercised too.
POOL = 20  # marker words per class
MARKERS = 0.2  # fraction of a sequence's words that mark its class
CONFUSERS = 0.05  # fraction that mark some other class
MIN_LENGTH = 0.5  # shortest sequence, as a fraction of the full length


def synthetic_tokens(config):
    """Arrays x_train (N, L) int64 token ids, y_train int64, x_val, y_val, from config['seed'].

    Uses config keys dataset_size, val_fraction, classes, seed; L and the vocabulary come from
    workers.models (SEQ_LEN, VOCAB). Only RandomState integer draws and integer arithmetic.
    """
    import numpy as np

    from workers import models

    n_train, n_val = split_sizes(config)
    if n_train < 1:
        raise ValueError("dataset_size {} with val_fraction {} leaves no training sequences".format(
            config["dataset_size"], config["val_fraction"]))
    classes, length, first = int(config["classes"]), models.SEQ_LEN, models.OOV + 1
    rng = np.random.RandomState(int(config["seed"]))
    if classes * POOL > models.VOCAB - first:
        raise ValueError("{} classes need more marker words than a vocabulary of {} has".format(
            classes, models.VOCAB))
    pools = (rng.permutation(models.VOCAB - first)[:classes * POOL] + first).reshape(classes, POOL)
    out = []
    for n in (n_train, n_val):
        labels = np.arange(n, dtype=np.int64) % classes
        rng.shuffle(labels)
        x = rng.randint(first, models.VOCAB, (n, length)).astype(np.int64)
        u = rng.randint(0, 1000, (n, length))
        marker = u < int(MARKERS * 1000)
        confuser = (u >= int(MARKERS * 1000)) & (u < int((MARKERS + CONFUSERS) * 1000))
        pick = rng.randint(0, POOL, (n, length))
        other = (labels[:, None] + rng.randint(1, max(classes, 2), (n, length))) % classes
        x = np.where(marker, pools[labels[:, None], pick], x)
        x = np.where(confuser, pools[other, pick], x)
        starts = length - rng.randint(int(MIN_LENGTH * length), length + 1, n)
        x[np.arange(n), starts] = models.START
        x[np.arange(length)[None, :] < starts[:, None]] = models.PAD
        out += [x, labels]
    return {"x_train": out[0], "y_train": out[1], "x_val": out[2], "y_val": out[3]}


# Synthetic language (the language models): a fixed random successor for every token of the
# vocabulary; a sequence starts at a random token and each next token is its predecessor's
# successor with probability FOLLOW, else a token drawn uniformly. The next token is then
# predictable FOLLOW of the time (plus 1 / vocabulary): next-token accuracy has that ceiling, and
# a language model climbs towards it in a few epochs. No padding: every sequence is full length.
FOLLOW = 0.8


def synthetic_language(config, vocab, length):
    """Arrays x_train (N, L) int64 token ids, y_train (N, L) the next token at each position, x_val,
    y_val, from config['seed'] (keys dataset_size, val_fraction, seed). Only RandomState integer
    draws and integer arithmetic, as synthetic_tokens."""
    import numpy as np

    n_train, n_val = split_sizes(config)
    if n_train < 1:
        raise ValueError("dataset_size {} with val_fraction {} leaves no training sequences".format(
            config["dataset_size"], config["val_fraction"]))
    rng = np.random.RandomState(int(config["seed"]))
    successor = rng.permutation(vocab).astype(np.int64)
    out = []
    for n in (n_train, n_val):
        seq = np.empty((n, length + 1), dtype=np.int64)
        seq[:, 0] = rng.randint(0, vocab, n)
        follow = rng.randint(0, 1000, (n, length)) < int(FOLLOW * 1000)
        noise = rng.randint(0, vocab, (n, length))
        for t in range(length):
            seq[:, t + 1] = np.where(follow[:, t], successor[seq[:, t]], noise[:, t])
        out += [np.ascontiguousarray(seq[:, :-1]), np.ascontiguousarray(seq[:, 1:])]
    return {"x_train": out[0], "y_train": out[1], "x_val": out[2], "y_val": out[3]}


def load(config):
    """The dataset a configuration asks for, as the arrays `synthetic` returns.

    Every adapter calls this (never `synthetic` directly), so every framework gets the same
    pixels (or token ids) in the same split for a given configuration.
    """
    from workers import models

    if config.get("dataset", "synthetic") == "synthetic":
        if config.get("model") in models.LANGUAGE:
            vocab = models.GPT[config["model"]][0]
            length = config.get("sequence_length") or models.default_sequence_length(config["model"])
            return synthetic_language(config, vocab, int(length))
        if config.get("model") in models.RECURRENT:
            return synthetic_tokens(config)
        return synthetic(config)
    return from_file(config)


def from_file(config):
    """A decoded dataset from the orchestrator's cache file (config['data_file']).

    A seeded sample of dataset_size images (RandomState: stable across numpy versions), split into
    train and validation, scaled from 0..255 to -1..1: the same preprocessing for every framework.
    """
    import numpy as np

    path = config.get("data_file")
    if not path:
        raise ValueError("dataset {!r} needs the orchestrator's data_file".format(config["dataset"]))
    with np.load(path) as f:
        x, y = f["x"], f["y"]
    n_train, n_val = split_sizes(config)
    if n_train + n_val > len(y):
        raise ValueError("dataset_size {} is more than the {} images in {}".format(
            n_train + n_val, len(y), path))
    index = np.random.RandomState(config["seed"]).permutation(len(y))[:n_train + n_val]
    labels = y[index].astype(np.int64)
    if x.ndim == 2:  # token ids (dataset imdb): used as they are
        tokens = x[index].astype(np.int64)
        return {"x_train": tokens[:n_train], "y_train": labels[:n_train],
                "x_val": tokens[n_train:], "y_val": labels[n_train:]}
    images = x[index].astype(np.float32)
    images /= np.float32(127.5)
    images -= np.float32(1.0)
    return {"x_train": images[:n_train], "y_train": labels[:n_train],
            "x_val": images[n_train:], "y_val": labels[n_train:]}
