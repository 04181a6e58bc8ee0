"""How a bookie serves one request of :mod:`.protocol`: the bookie's side of the protocol, apart from any transport.

The in-process cluster (:mod:`.cluster`) hands requests to :func:`serve`
directly; the TCP server (:mod:`ledgerspec.reference.wire.server`) decodes
BookKeeper's v3 wire messages into the same requests. Both get the same
answers from the same code.

=================  =====================================================  ==================================
kind               the reference bookie                                   BookKeeper 4.17.2 (``proto/``)
=================  =====================================================  ==================================
``ADD``            ``add_entry`` (``recovery`` for a recovery add)        ``WriteEntryProcessorV3``
``WRITE_LAC``      ``set_explicit_lac``                                   ``WriteLacProcessorV3``
``FENCE``          ``fence_ledger``, then the piggybacked LAC             ``ReadEntryProcessorV3`` with
                                                                          ``FENCE_LEDGER``, entry -1
``RECOVERY_READ``  ``fence_ledger``, then ``read_entry``                  the same, entry >= 0
``READ_LAC``       ``read_last_add_confirmed``                            ``ReadLacProcessorV3``
``READ_ENTRY``     ``read_entry`` (entry -1: the last entry)              ``ReadEntryProcessorV3``
=================  =====================================================  ==================================
"""

from __future__ import annotations

from ledgerspec.reference.bookie import (
    BadEntryError,
    Bookie,
    LedgerFencedError,
    NoSuchEntryError,
    NoSuchLedgerError,
    UnauthorizedError,
)
from ledgerspec.reference.ledger.protocol import Reply, ReplyCode, Request, RequestKind

__all__ = ["answer", "serve"]


def serve(bookie: Bookie, request: Request) -> Reply:
    """Answer ``request`` and make what it changed durable before the reply goes out (the journal's group commit)."""
    reply = answer(bookie, request)
    bookie.force_write()  # the reply waits for the journal's fsync (Journal.ForceWriteThread)
    return reply


def answer(bookie: Bookie, request: Request) -> Reply:
    """The bookie takes ``request`` in; its reply, which a change waits on the journal's fsync for (:func:`serve`).

    The errors map as ``WriteEntryProcessorV3.getAddResponse`` and
    ``ReadEntryProcessorV3.getReadResponse`` map BookKeeper's exceptions:
    a fenced ledger EFENCED, a ledger or entry it does not hold ENOLEDGER
    or ENOENTRY, another master key EUA; a malformed entry (which
    BookKeeper stores unchecked) EBADREQ.
    """
    kind, lid, key = request.kind, request.ledger_id, request.master_key
    try:
        if kind is RequestKind.ADD:
            bookie.add_entry(request.data, key, recovery=request.recovery)
            return Reply(request, ReplyCode.OK)
        if kind is RequestKind.WRITE_LAC:
            bookie.set_explicit_lac(request.data, key)
            return Reply(request, ReplyCode.OK)
        if request.fence:
            bookie.fence_ledger(lid, key)
        if kind is RequestKind.FENCE:
            return Reply(request, ReplyCode.OK, lac=bookie.read_piggybacked_lac(lid))
        if kind is RequestKind.READ_LAC:
            return Reply(request, ReplyCode.OK, lac=bookie.read_last_add_confirmed(lid))
        return Reply(request, ReplyCode.OK, data=bookie.read_entry(lid, request.entry_id))
    except LedgerFencedError:
        return Reply(request, ReplyCode.FENCED)
    except NoSuchLedgerError:
        return Reply(request, ReplyCode.NO_SUCH_LEDGER)
    except NoSuchEntryError:
        return Reply(request, ReplyCode.NO_SUCH_ENTRY)
    except UnauthorizedError:
        return Reply(request, ReplyCode.UNAUTHORIZED)
    except BadEntryError:
        return Reply(request, ReplyCode.REFUSED)
