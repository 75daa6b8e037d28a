#include "nightshift/err.h"

static const struct {
    const char *name;
    const char *text;
} s_errs[NS_ERR_COUNT] = {
    {"ok", "success"},
    {"nomem", "out of memory"},
    {"invalid", "invalid argument"},
    {"io", "I/O error"},
    {"perm", "file permissions are too open"},
    {"not_found", "not found"},
    {"exists", "already exists"},
    {"corrupt", "stored data is corrupt"},
    {"too_big", "length over its cap"},
    {"truncated", "input is truncated"},
    {"bad_type", "value of the wrong type"},
    {"bad_version", "unknown protocol version"},
    {"unknown_type", "unknown message type"},
    {"bad_sig", "signature does not verify"},
    {"stale", "timestamp outside the accepted window"},
    {"replay", "message already seen"},
    {"wrong_network", "peer belongs to another network"},
    {"rate_limited", "over the rate limit"},
    {"zmq", "ZeroMQ error"},
    {"crypto", "cryptography error"},
    {"bad_addr", "malformed address"},
    {"addr_in_use", "address already in use"},
    {"timeout", "timed out"},
    {"bad_proof", "proof does not verify"},
    {"trailing", "trailing bytes after value"},
    {"config", "bad configuration"},
    {"opencl", "OpenCL error"},
    {"bad_state", "not valid in the current state"},
    {"self", "refers to this node itself"},
    {"bad_prev", "prev is not the author's head"},
    {"seq_gap", "entry is ahead of its author's head"},
    {"insufficient_funds", "balance would go negative"},
    {"credit_claimed", "credit already taken in"},
    {"no_credit", "reference carries no credit for the author"},
    {"fork", "two entries with the same author and seq"},
    {"banned", "author is banned for forking"},
    {"job_state", "job missing or in the wrong state"},
    {"missing_dep", "depends on an entry not yet known"},
    {"duplicate", "entry already stored"},
    {"map_full", "ledger map full: raise ledger.map_size"},
    {"interrupted", "interrupted"},
};

const char *ns_strerror(int rc)
{
    if (rc > 0 || rc <= -NS_ERR_COUNT)
        return "unknown error";
    return s_errs[-rc].text;
}

const char *ns_errname(int rc)
{
    if (rc > 0 || rc <= -NS_ERR_COUNT)
        return "unknown";
    return s_errs[-rc].name;
}
