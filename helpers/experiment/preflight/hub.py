"""One metadata call to the hub, its failures turned into what to do (log in, connect, check the id or revision).

    info = ask_hub(lambda api: api.model_info(name, files_metadata=True), "model_id_or_path", name)
"""

from __future__ import annotations

from helpers.experiment.preflight.check import PreflightError


def ask_hub(call, param: str, name: str, kind: str = "model"):
    """call(HfApi()) -> its answer; PreflightError naming `param`=`name` where the hub refuses or cannot be reached."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError

    try:
        return call(HfApi())
    except GatedRepoError as err:
        raise PreflightError(f"{param}={name!r} is gated: accept its terms on the hub and log in (hf auth login, or "
                             "HF_TOKEN)") from err
    except RepositoryNotFoundError as err:
        raise PreflightError(f"{param}={name!r}: no such {kind} on the hub (or a private one: log in); check the id, "
                             "or give a local folder") from err
    except RevisionNotFoundError as err:
        raise PreflightError(f"{param}={name!r}: the hub has no such revision ({str(err).splitlines()[0][:160]}); "
                             "check the revision (the parquet conversion is refs/convert/parquet)") from err
    except OSError as err:                       # requests' ConnectionError and timeouts; offline mode
        raise PreflightError(f"{param}={name!r}: the hub could not be reached ({type(err).__name__}: "
                             f"{str(err)[:160]}); connect to the network, or give a local folder") from err
