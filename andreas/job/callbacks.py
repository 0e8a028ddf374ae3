"""Keras and Lightning callbacks that print progress lines and checkpoint (duck-typed:
no framework is imported until a factory asks for its base class)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .checkpoint import save_checkpoint
from .names import ENV_EPOCHS, JobEnv
from .progress import EpochReporter, float_metrics
from .signals import GracefulStop


class _CallbackConfig:
    def _configure(self, reporter: EpochReporter | None, epochs: int | None,
                   checkpoint_dir: str | Path | None, save: bool,
                   stop: GracefulStop | None) -> None:
        self.reporter = reporter if reporter is not None else EpochReporter(epochs=epochs)
        if epochs is not None:
            self.reporter.epochs = epochs
        env_dir = JobEnv.from_environ().checkpoint_dir if checkpoint_dir is None else None
        self.checkpoint_dir = Path(checkpoint_dir) if checkpoint_dir is not None else env_dir
        self.save = save
        self.stop = stop
        self._warned = False

    def _can_report(self) -> bool:
        """False (with one warning on stderr) while the number of epochs is unknown: a
        callback must not break a training run, inside andreas or out of it."""
        if self.reporter.epochs is not None:
            return True
        if not self._warned:
            self._warned = True
            with contextlib.suppress(OSError):
                os.write(2, f"andreas: {ENV_EPOCHS} is not set and the framework gives no "
                            f"finite number of epochs: no progress lines\n".encode())
        return False


class _KerasHooks(_CallbackConfig):
    """The progress logic of the Keras callback; ``model`` and ``params`` come from the
    callback base (Keras' own, or :class:`_KerasPlumbing`)."""

    def __init__(self, reporter: EpochReporter | None = None, *, epochs: int | None = None,
                 checkpoint_dir: str | Path | None = None, save: bool = False,
                 stop: GracefulStop | None = None) -> None:
        super().__init__()
        self._configure(reporter, epochs, checkpoint_dir, save, stop)

    def on_epoch_begin(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        if self.reporter.epochs is None:
            epochs = (getattr(self, "params", None) or {}).get("epochs")
            if isinstance(epochs, int) and not isinstance(epochs, bool) and epochs > 0:
                self.reporter.epochs = epochs
        if self._can_report():
            self.reporter.start(epoch + 1)

    def on_epoch_end(self, epoch: int, logs: Mapping[str, Any] | None = None) -> None:
        model = getattr(self, "model", None)
        if self.save and self.checkpoint_dir is not None and model is not None:
            save_checkpoint(self.checkpoint_dir, epoch + 1, lambda p: model.save(str(p)),
                            suffix=".keras")
        if self._can_report():
            self.reporter.end(epoch + 1, float_metrics(logs))
        if self.stop is not None and self.stop.requested and model is not None:
            model.stop_training = True


class _KerasPlumbing:
    """What Keras calls on every callback, as no-ops (the duck-typed base)."""

    _supports_tf_logs = False

    def __init__(self) -> None:
        self.model: Any = None
        self.params: dict[str, Any] = {}
        self.validation_data = None

    def set_params(self, params: dict[str, Any]) -> None:
        self.params = params

    def set_model(self, model: Any) -> None:
        self.model = model

    def __getattr__(self, name: str) -> Any:
        # on_train_begin, on_test_batch_end, ...: every other hook does nothing.
        if name.startswith("on_"):
            return _no_op
        raise AttributeError(name)


class KerasProgressCallback(_KerasHooks, _KerasPlumbing):
    """Keras callback: prints the start/end line of every epoch (Keras counts from 0, the
    line from 1), optionally saves ``model.save()`` as the epoch's checkpoint
    (``save=True``, into ``checkpoint_dir`` or ``$ANDREAS_CHECKPOINT_DIR``), and stops
    training after the epoch once ``stop.requested``. Resume with
    ``initial_epoch=completed_epochs(dir)``. Duck-typed; :func:`keras_callback` returns
    a subclass of Keras' own ``Callback`` where Keras is installed."""


class _LightningHooks(_CallbackConfig):
    def __init__(self, reporter: EpochReporter | None = None, *, epochs: int | None = None,
                 checkpoint_dir: str | Path | None = None, save: bool = False,
                 stop: GracefulStop | None = None) -> None:
        super().__init__()
        self._configure(reporter, epochs, checkpoint_dir, save, stop)

    @staticmethod
    def _rank_zero(trainer: Any) -> bool:
        return bool(getattr(trainer, "is_global_zero", True))

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        if not self._rank_zero(trainer):
            return
        if self.reporter.epochs is None:
            max_epochs = getattr(trainer, "max_epochs", None)
            if isinstance(max_epochs, int) and max_epochs > 0:
                self.reporter.epochs = max_epochs
        if self._can_report():
            self.reporter.start(int(trainer.current_epoch) + 1)

    def on_train_epoch_end(self, trainer: Any, pl_module: Any) -> None:
        epoch = int(trainer.current_epoch) + 1
        if self._rank_zero(trainer):
            if self.save and self.checkpoint_dir is not None:
                save_checkpoint(self.checkpoint_dir, epoch,
                                lambda p: trainer.save_checkpoint(str(p)), suffix=".ckpt")
            if self._can_report():
                self.reporter.end(epoch, float_metrics(getattr(trainer, "callback_metrics",
                                                                None)))
        if self.stop is not None and self.stop.requested:
            trainer.should_stop = True


class _LightningPlumbing:
    """What Lightning reads from every callback, as no-ops (the duck-typed base)."""

    @property
    def state_key(self) -> str:
        return type(self).__qualname__

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        if name.startswith("on_") or name in ("setup", "teardown"):
            return _no_op
        raise AttributeError(name)


class LightningProgressCallback(_LightningHooks, _LightningPlumbing):
    """PyTorch Lightning callback: prints the start/end line of every training epoch
    (rank 0 only), optionally saves ``trainer.save_checkpoint()`` as the epoch's
    checkpoint (``save=True``; rank 0 only, so not for sharded strategies: use
    Lightning's ModelCheckpoint and :func:`write_manifest` there), and sets
    ``trainer.should_stop`` once ``stop.requested``. Resume with
    ``trainer.fit(model, ckpt_path=latest_checkpoint(dir).path)``. Duck-typed;
    :func:`lightning_callback` returns a subclass of Lightning's ``Callback`` where
    Lightning is installed."""


def _no_op(*args: Any, **kwargs: Any) -> None:
    return None


def _framework_base(candidates: tuple[tuple[str, str], ...]) -> type | None:
    import importlib
    for module_name, attr in candidates:
        try:
            module = importlib.import_module(module_name)
        except Exception:       # noqa: BLE001 — absent or broken framework: try the next
            continue
        base = getattr(module, attr, None)
        if isinstance(base, type):
            return base
    return None


def keras_callback(reporter: EpochReporter | None = None, **options: Any) -> Any:
    """A :class:`KerasProgressCallback` that is also a ``keras.callbacks.Callback``
    (Keras 3 or ``tf.keras``) when one can be imported, else the duck-typed class."""
    base = _framework_base((("keras.callbacks", "Callback"),
                            ("tensorflow.keras.callbacks", "Callback")))
    if base is None:
        return KerasProgressCallback(reporter, **options)
    cls = type("AndreasKerasCallback", (_KerasHooks, base),
               {"__doc__": KerasProgressCallback.__doc__})
    return cls(reporter, **options)


def lightning_callback(reporter: EpochReporter | None = None, **options: Any) -> Any:
    """A :class:`LightningProgressCallback` that is also a Lightning ``Callback``
    (``lightning.pytorch`` or ``pytorch_lightning``) when one can be imported, else the
    duck-typed class."""
    base = _framework_base((("lightning.pytorch", "Callback"),
                            ("pytorch_lightning", "Callback")))
    if base is None:
        return LightningProgressCallback(reporter, **options)
    cls = type("AndreasLightningCallback", (_LightningHooks, base),
               {"__doc__": LightningProgressCallback.__doc__})
    return cls(reporter, **options)
