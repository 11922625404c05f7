"""Where a run's noise comes from: one secret, never published, from OS entropy by default.

Threat model (README, "What may be shared"): the attacker reads every file dpmt writes into
a model folder. If a noise draw could be regenerated from anything there (a seed, a key, a
count of repetitions), the noise could be subtracted and ε would be ∞. So:

* :meth:`NoiseSource.fresh` draws a 256-bit secret from the operating system
  (:func:`secrets.token_bytes`, i.e. ``getrandom(2)`` / ``/dev/urandom``). It is written
  only into the trainer's private state (the checkpoint, so that a resumed run draws the
  same noise and stays bit-identical) and never into the shareable model folder.
* :meth:`NoiseSource.from_seed` derives the secret from a user-given integer seed, for
  reproducible experiments. Such a source is marked ``reproducible``; every output of a
  run that uses one says the model is **not private against anyone who knows the seed**.
* Every random stream of a run (capping, count noise, V0, each iteration's noise, …) is
  derived from the secret and a *label* by SHA-256 (domain separation), so streams are
  independent and one stream's values say nothing about another's.

Two kinds of streams:

* :meth:`NoiseSource.jax_key` — a threefry key (two uint32 words = 64 bits) for the
  vectorised samplers that run inside jitted JAX code. Threefry-2x32 (Salmon et al. 2011)
  is a keyed bijection; knowing outputs of one key does not reveal another label's key.
* :meth:`NoiseSource.random` — a :class:`random.Random` whose bits come from SHAKE-256 of
  (secret, label) (FIPS 202), for the exact discrete Gaussian sampler and other host-side
  draws that need exact integer arithmetic (:mod:`dpmt.privacy.discrete_gaussian`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import secrets

import numpy as np

SECRET_BYTES = 32

#: what a reproducible (seeded) run's outputs say
SEEDED_WARNING = ("the noise of this model was drawn from a user-given seed: it is NOT "
                  "private against anyone who knows that seed (train without --seed for a "
                  "secret key from OS entropy)")


class KeyedRandom(random.Random):
    """A :class:`random.Random` whose bits are SHAKE-256(secret ‖ label) read in order.

    Deterministic for a given (secret, label) and unpredictable without the secret.
    ``getrandbits`` / ``randbelow`` / ``random`` all read the same byte stream;
    :meth:`seed` is refused (the stream is fixed by its key).
    """

    _CHUNK = 1 << 14

    def __init__(self, secret: bytes, label: str):
        self._key = None
        super().__init__()                # calls seed() once, before the key is set
        self._key = hashlib.sha256(b"dpmt-random\x00" + secret + label.encode()).digest()
        self._block = 0
        self._buf = b""
        self._pos = 0

    def seed(self, *args, **kwargs):
        if self._key is not None:
            raise TypeError("a KeyedRandom's stream is fixed by its secret and label")

    def getstate(self):
        return (self._key, self._block, self._buf, self._pos)

    def setstate(self, state):
        self._key, self._block, self._buf, self._pos = state

    def _bytes(self, n: int) -> bytes:
        out = bytearray()
        while n > 0:
            if self._pos >= len(self._buf):
                h = hashlib.shake_256(self._key + self._block.to_bytes(8, "little"))
                self._buf, self._pos = h.digest(self._CHUNK), 0
                self._block += 1
            take = min(n, len(self._buf) - self._pos)
            out += self._buf[self._pos:self._pos + take]
            self._pos += take
            n -= take
        return bytes(out)

    def getrandbits(self, k: int) -> int:
        if k < 0:
            raise ValueError("number of bits must be non-negative")
        if k == 0:
            return 0
        n = (k + 7) // 8
        return int.from_bytes(self._bytes(n), "little") >> (8 * n - k)

    def random(self) -> float:
        return self.getrandbits(53) * (1.0 / 9007199254740992.0)


@dataclasses.dataclass(frozen=True)
class NoiseSource:
    """The one secret a run's randomness derives from (see the module docstring).

    Attributes:
      secret: 32 bytes; never written to a published file.
      reproducible: True when derived from a user-given seed (then not private against
        whoever knows the seed).
    """

    secret: bytes = dataclasses.field(repr=False)
    reproducible: bool = False

    def __post_init__(self):
        if not isinstance(self.secret, bytes) or len(self.secret) != SECRET_BYTES:
            raise ValueError(f"a noise secret is {SECRET_BYTES} bytes")

    @classmethod
    def fresh(cls) -> "NoiseSource":
        """A secret from OS entropy (the default for every private run)."""
        return cls(secrets.token_bytes(SECRET_BYTES), reproducible=False)

    @classmethod
    def from_seed(cls, seed: int) -> "NoiseSource":
        """A reproducible source: NOT private against anyone who knows ``seed``."""
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"a seed is an integer (got {type(seed).__name__})")
        digest = hashlib.sha256(b"dpmt-seed\x00" + str(int(seed)).encode()).digest()
        return cls(digest, reproducible=True)

    @classmethod
    def create(cls, seed: int | None) -> "NoiseSource":
        """:meth:`fresh` when ``seed`` is None, else :meth:`from_seed`."""
        return cls.fresh() if seed is None else cls.from_seed(seed)

    def _digest(self, label: str) -> bytes:
        return hashlib.sha256(b"dpmt-stream\x00" + self.secret + label.encode()).digest()

    def jax_key(self, label: str):
        """A threefry PRNG key (uint32[2], JAX's legacy raw key) for the stream ``label``."""
        import jax.numpy as jnp

        words = np.frombuffer(self._digest(label)[:8], dtype="<u4").astype(np.uint32)
        return jnp.asarray(words, dtype=jnp.uint32)

    def numpy_rng(self, label: str) -> np.random.Generator:
        """A numpy Generator (Philox with a 128-bit key from the secret) for ``label``:
        host-side index sampling such as capping, never noise added to a released value."""
        key = int.from_bytes(self._digest(label)[:16], "little")
        return np.random.Generator(np.random.Philox(key=key))

    def random(self, label: str) -> KeyedRandom:
        """A :class:`KeyedRandom` for the stream ``label`` (exact host-side samplers)."""
        return KeyedRandom(self.secret, label)

    def child(self, label: str) -> "NoiseSource":
        """An independent source for a sub-run (e.g. one repetition of a private tuning)."""
        return NoiseSource(self._digest("child/" + label), reproducible=self.reproducible)

    # -- private state (the trainer's folder only) ---------------------------------------
    def to_private_state(self) -> dict:
        return {"secret_hex": self.secret.hex(), "reproducible": self.reproducible}

    @classmethod
    def from_private_state(cls, d: dict) -> "NoiseSource":
        return cls(bytes.fromhex(d["secret_hex"]), reproducible=bool(d["reproducible"]))


def shared_across_processes(source: NoiseSource) -> NoiseSource:
    """The source every process of a multi-process (``jax.distributed``) run uses: process
    0's.

    Each process of one training run executes the same program; if each drew its own
    OS-entropy secret, the "replicated" releases would carry different noise on each host and
    disagree (JAX refuses such an array; averaged, the noise would shrink by √P and ε would
    not hold). So the 32 bytes travel from process 0 to the others over the run's own
    collectives, i.e. among the trainer's processes only. A single process returns
    ``source`` itself (nothing is communicated).
    """
    import jax

    if jax.process_count() == 1:
        return source
    from jax.experimental import multihost_utils

    words = np.frombuffer(source.secret, dtype=np.uint32).copy()
    agreed = np.asarray(multihost_utils.broadcast_one_to_all(words), dtype=np.uint32)
    return NoiseSource(agreed.tobytes(), reproducible=source.reproducible)

