#!/usr/bin/env bash
# testnet/run.sh - start N nightshift nodes on 127.0.0.1 with a shared,
# funded genesis, and wait until every node sees every other one (16 of
# them at least in a larger testnet).
#
# Layout of DIR (see --help): node0..nodeN-1 and requester datadirs,
# genesis.ini, bootstrap (node 0's address), pids ("PID DATADIR" per node,
# read by testnet/stop.sh), testnet.env (settings of this run).
set -u -o pipefail

PROG=testnet/run.sh
SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(dirname "$SCRIPT_DIR")

usage() {
    cat <<EOF
usage: $PROG -n N -d DIR [-p BASE_PORT] [-i HEARTBEAT_MS] [-t TIMEOUT_S]
                      [-c CREDITS] [-r REQUESTERS] [-w CLOSE_WINDOW_S]

Start a local nightshift test network: N nodes on 127.0.0.1, node i on
BASE_PORT+i, all sharing one genesis that funds every node and a requester.
Nodes 1..N-1 join through node 0 (and node 1). The nodes run in the
background and outlive this script; stop them with testnet/stop.sh -d DIR.

  -n N             number of nodes (1..200)
  -d DIR           directory for the testnet (created; must be empty or a
                   stopped testnet of this script, whose datadirs are
                   replaced: its node logs are kept in DIR/logs/TIME/,
                   and files or directories the user added stay)
  -p BASE_PORT     first port (default: a free range picked at random in
                   20000..32000, printed)
  -i HEARTBEAT_MS  heartbeat interval of every node (default 1000); a node
                   is dropped after 3 missed intervals
  -t TIMEOUT_S     how long to wait for the network to form (default 30)
  -c CREDITS       genesis credits for each node and the requester
                   (default 1000000)
  -r REQUESTERS    funded requester datadirs to create (default 1):
                   requester, requester1, .. requesterR-1, each funded
                   with CREDITS, so that R submits can run at once
  -w CLOSE_WINDOW_S the genesis close window: how long after a job's
                   deadline its requester may still settle, slash or
                   cancel before the provider closes it (default 60,
                   at most 120; docs/PROTOCOL.md, "Closing")
  -h, --help       this help

The binary is \$NIGHTSHIFT_BIN, else build/nightshift in the repository,
else \`nightshift\` on PATH.

What DIR holds afterwards:
  DIR/node0 .. DIR/nodeN-1   node datadirs (log in DIR/nodeI/node.log)
  DIR/requester              a funded datadir for \`nightshift submit\`
                             (no node runs on it)
  DIR/requester1 ..          more of them with -r R (R > 1)
  DIR/genesis.ini            the network's genesis
  DIR/bootstrap              node 0's address, ID@tcp://127.0.0.1:PORT
  DIR/pids                   "PID DATADIR" for each node started
  DIR/testnet.env            N, BASE_PORT, HEARTBEAT_MS, BIN, REQUESTERS of
                             this run
  DIR/logs/TIME/nodeI.log    the node logs of testnets this one replaced

Exit status: 0 when all N nodes see N-1 live peers; 1 otherwise (the nodes
started are stopped again); 2 on a usage error.
EOF
}

die() {
    echo "$PROG: $*" >&2
    exit 1
}
usage_error() {
    echo "$PROG: $* (see --help)" >&2
    exit 2
}
is_uint() { [[ $1 =~ ^[0-9]+$ ]]; }

N="" DIR="" BASE_PORT="" HB_MS=1000 TIMEOUT_S=30 CREDITS=1000000 NREQ=1
CLOSE_S=60
for a in "$@"; do
    if [ "$a" = "--help" ] || [ "$a" = "-h" ]; then
        usage
        exit 0
    fi
done
while getopts ":n:d:p:i:t:c:r:w:" opt; do
    case $opt in
    n) N=$OPTARG ;;
    d) DIR=$OPTARG ;;
    p) BASE_PORT=$OPTARG ;;
    i) HB_MS=$OPTARG ;;
    t) TIMEOUT_S=$OPTARG ;;
    c) CREDITS=$OPTARG ;;
    r) NREQ=$OPTARG ;;
    w) CLOSE_S=$OPTARG ;;
    :) usage_error "-$OPTARG needs a value" ;;
    *) usage_error "unknown option -$OPTARG" ;;
    esac
done
shift $((OPTIND - 1))
[ $# -eq 0 ] || usage_error "unexpected argument '$1'"
[ -n "$N" ] || usage_error "-n N is required"
[ -n "$DIR" ] || usage_error "-d DIR is required"
is_uint "$N" && [ "$N" -ge 1 ] && [ "$N" -le 200 ] ||
    usage_error "-n must be 1..200, not '$N'"
is_uint "$HB_MS" && [ "$HB_MS" -ge 100 ] ||
    usage_error "-i must be a number of milliseconds >= 100, not '$HB_MS'"
is_uint "$TIMEOUT_S" && [ "$TIMEOUT_S" -ge 1 ] ||
    usage_error "-t must be a number of seconds >= 1, not '$TIMEOUT_S'"
is_uint "$CREDITS" || usage_error "-c must be a number, not '$CREDITS'"
is_uint "$NREQ" && [ "$NREQ" -ge 1 ] && [ "$NREQ" -le 200 ] ||
    usage_error "-r must be 1..200, not '$NREQ'"
is_uint "$CLOSE_S" && [ "$CLOSE_S" -ge 1 ] && [ "$CLOSE_S" -le 120 ] ||
    usage_error "-w must be 1..120 seconds, not '$CLOSE_S'"
if [ -n "$BASE_PORT" ]; then
    is_uint "$BASE_PORT" && [ "$BASE_PORT" -ge 1 ] &&
        [ $((BASE_PORT + N - 1)) -le 65535 ] ||
        usage_error "-p must leave room for $N ports below 65536, not '$BASE_PORT'"
fi

# ---- the binary ---------------------------------------------------------
if [ -n "${NIGHTSHIFT_BIN:-}" ]; then
    BIN=$NIGHTSHIFT_BIN
elif [ -x "$REPO_ROOT/build/nightshift" ]; then
    BIN=$REPO_ROOT/build/nightshift
else
    BIN=$(command -v nightshift) || BIN=""
fi
[ -n "$BIN" ] && [ -x "$BIN" ] ||
    die "no nightshift binary: set NIGHTSHIFT_BIN, build the repository (build/nightshift), or put nightshift on PATH"
case $BIN in /*) ;; *) BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN") ;; esac

# ---- the directory ---------------------------------------------------------
mkdir -p "$DIR" || die "cannot create $DIR"
DIR=$(cd "$DIR" && pwd -P) || die "cannot enter $DIR"

# A pid still runs "nightshift node --datadir D" (zombies do not count).
node_alive() { # PID DATADIR
    local pid=$1 dd=$2 state
    [ -r "/proc/$pid/stat" ] || return 1
    state=$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "$state" != Z ] || return 1
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null |
        awk -v dd="$dd" 'prev == "--datadir" && $0 == dd { f = 1 }
                         $0 == "node" { n = 1 } { prev = $0 }
                         END { exit !(f && n) }'
}

if [ -f "$DIR/pids" ]; then
    running=""
    while read -r pid dd; do
        [ -n "${pid:-}" ] || continue
        node_alive "$pid" "$dd" && running="$running $pid"
    done <"$DIR/pids"
    [ -z "$running" ] ||
        die "$DIR already has a running testnet (pids:$running); stop it first with testnet/stop.sh -d $DIR"
fi
# What a run of this script made in DIR, from that run's N and REQUESTERS:
# node0..nodeN-1, requester, requester1..requesterR-1 (one per line).
made_by_run() { # N REQUESTERS
    local n=$1 r=$2 i
    for ((i = 0; i < n; i++)); do echo "node$i"; done
    echo requester
    for ((i = 1; i < r; i++)); do echo "requester$i"; done
}
env_value() { # KEY: its value in DIR/testnet.env (read, never sourced)
    sed -n "s/^$1=//p" "$DIR/testnet.env" | head -n 1
}

if [ -f "$DIR/testnet.env" ]; then
    # A stopped testnet of ours: start afresh (new keys, new genesis), but
    # replace only what that run made. Its node logs are kept under
    # DIR/logs/<time>/, and whatever else the user put in DIR stays.
    old_n=$(env_value N)
    old_r=$(env_value REQUESTERS)
    is_uint "${old_n:-x}" || old_n=0
    is_uint "${old_r:-x}" || old_r=1
    stamp=$(date -u +%Y%m%dT%H%M%SZ)
    kept=""
    while read -r name; do
        dd=$DIR/$name
        [ -d "$dd" ] || continue
        if [ -f "$dd/node.log" ]; then
            mkdir -p "$DIR/logs/$stamp" || die "cannot create $DIR/logs/$stamp"
            mv "$dd/node.log" "$DIR/logs/$stamp/$name.log" ||
                die "cannot keep $dd/node.log"
            kept="$DIR/logs/$stamp"
        fi
        rm -rf "$dd"
    done < <(made_by_run "$old_n" "$old_r")
    rm -f "$DIR/genesis.ini" "$DIR/bootstrap" "$DIR/pids" "$DIR/testnet.env"
    echo "replacing the stopped testnet in $DIR${kept:+ (its node logs are kept in $kept)}"
elif [ -n "$(ls -A "$DIR")" ]; then
    die "$DIR is not empty and is not a testnet made by this script; use an empty or new directory"
fi
# What this run makes must not overwrite what the user put there.
while read -r name; do
    [ ! -e "$DIR/$name" ] ||
        die "$DIR/$name exists and is not from the stopped testnet; move it away or use another directory"
done < <(made_by_run "$N" "$NREQ")
for f in genesis.ini bootstrap pids testnet.env; do
    [ ! -e "$DIR/$f" ] || die "$DIR/$f exists and is not from a testnet of this script"
done

# ---- ports -------------------------------------------------------------------
# Listening TCP ports on this machine, one per line.
listening_ports() {
    if command -v ss >/dev/null 2>&1; then
        ss -Hltn 2>/dev/null | awk '{ n = split($4, a, ":"); print a[n] }'
    fi
}
# True if any port in [base, base+n) is taken.
range_taken() { # BASE N
    local base=$1 n=$2 p taken
    taken=$(listening_ports)
    for ((p = base; p < base + n; p++)); do
        if [ -n "$taken" ]; then
            grep -qx "$p" <<<"$taken" && return 0
        elif (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
            return 0 # something answered there
        fi
    done
    return 1
}

if [ -n "$BASE_PORT" ]; then
    range_taken "$BASE_PORT" "$N" &&
        die "a port in $BASE_PORT..$((BASE_PORT + N - 1)) is already in use; pick another -p or omit it"
else
    # Below the kernel's ephemeral range (32768+ by default), so outgoing
    # connections cannot hold our ports; seeded by our pid so scripts run
    # side by side start from different places.
    span=$((32000 - 20000 - N))
    for ((try = 0; try < 50; try++)); do
        cand=$((20000 + ((($$ + try * 7919) * 131) % span)))
        if ! range_taken "$cand" "$N"; then
            BASE_PORT=$cand
            break
        fi
    done
    [ -n "$BASE_PORT" ] || die "found no free range of $N ports in 20000..32000; pass -p"
    echo "ports: $BASE_PORT..$((BASE_PORT + N - 1)) (pass -p to choose)"
fi

# ---- datadirs and genesis ---------------------------------------------------
STARTED=() # pids, for stopping them again on failure

cleanup_on_failure() {
    [ ${#STARTED[@]} -gt 0 ] || return 0
    echo "$PROG: stopping the nodes started" >&2
    "$SCRIPT_DIR/stop.sh" -d "$DIR" >&2 || true
}
fail() {
    echo "$PROG: $*" >&2
    cleanup_on_failure
    exit 1
}
trap 'fail "interrupted"' INT TERM

ns() { # run the binary, keep its stderr for the error message
    local out
    if ! out=$("$BIN" "$@" 2>&1); then
        fail "\`nightshift $*\` failed: $out"
    fi
    printf '%s\n' "$out"
}

# Datadirs 0..N-1 are the nodes, N..N+NREQ-1 the requesters.
LAST=$((N + NREQ - 1))
declare -a IDS DATADIRS
for ((i = 0; i <= LAST; i++)); do
    if [ "$i" -lt "$N" ]; then
        dd=$DIR/node$i
        listen=tcp://127.0.0.1:$((BASE_PORT + i))
    elif [ "$i" -eq "$N" ]; then
        dd=$DIR/requester
        listen=tcp://127.0.0.1:0
    else
        dd=$DIR/requester$((i - N))
        listen=tcp://127.0.0.1:0
    fi
    stake=()
    [ "$i" -lt "$N" ] && stake=(--set "node.stake=$((CREDITS / 2))")
    ns init --datadir "$dd" --listen "$listen" \
        --set "node.heartbeat_interval_ms=$HB_MS" "${stake[@]}" >/dev/null
    id=$(ns id --datadir "$dd" | head -n 1)
    [ ${#id} -eq 52 ] || fail "unexpected id '$id' from nightshift id --datadir $dd"
    IDS[i]=$id
    DATADIRS[i]=$dd
done

alloc=()
for ((i = 0; i <= LAST; i++)); do
    alloc+=(--alloc "${IDS[i]}=$CREDITS")
done
# A test network's close window is a minute (-w), not ten: a job its
# requester left is closed by its provider that long past its deadline
# (docs/PROTOCOL.md, "Closing").
ns genesis --out "$DIR/genesis.ini" --name "testnet-$(basename "$DIR")" \
    --close-window-s "$CLOSE_S" "${alloc[@]}" >/dev/null
for ((i = 0; i <= LAST; i++)); do
    ns init --datadir "${DATADIRS[i]}" --genesis "$DIR/genesis.ini" >/dev/null
done
# Benchmark the devices once and share the figures: N nodes measuring at
# the same time on one machine would each see a fraction of it. Best
# effort: without the figures each node measures its own (so the binary
# itself, not ns, which would end the script on a failure).
if "$BIN" devices --datadir "${DATADIRS[0]}" --json >/dev/null 2>&1 &&
    [ -f "${DATADIRS[0]}/devbench.msgpack" ]; then
    for ((i = 1; i < N; i++)); do
        cp "${DATADIRS[0]}/devbench.msgpack" "${DATADIRS[i]}/"
    done
fi

BOOTSTRAP=${IDS[0]}@tcp://127.0.0.1:$BASE_PORT
printf '%s\n' "$BOOTSTRAP" >"$DIR/bootstrap"
cat >"$DIR/testnet.env" <<EOF
N=$N
BASE_PORT=$BASE_PORT
HEARTBEAT_MS=$HB_MS
BIN=$BIN
BOOTSTRAP=$BOOTSTRAP
REQUESTERS=$NREQ
EOF

# ---- start the nodes ---------------------------------------------------------
: >"$DIR/pids"
for ((i = 0; i < N; i++)); do
    dd=${DATADIRS[i]}
    boot=()
    [ "$i" -ge 1 ] && boot+=(--bootstrap "$BOOTSTRAP")
    [ "$i" -ge 2 ] && boot+=(--bootstrap "${IDS[1]}@tcp://127.0.0.1:$((BASE_PORT + 1))")
    # setsid: its own session, so closing this terminal or a Ctrl-C in it
    # does not reach the node. A background job of a script is not a
    # process group leader, so setsid execs in place and $! is the node.
    setsid "$BIN" node --datadir "$dd" "${boot[@]}" \
        </dev/null >"$dd/node.log" 2>&1 &
    pid=$!
    STARTED+=("$pid")
    printf '%s %s\n' "$pid" "$dd" >>"$DIR/pids"
done

# A node this script started is alive while it is our child and no
# zombie. (Its command line is no test here: until the forked child has
# exec'ed setsid and the binary, it still shows this script's, and on a
# loaded machine that window is long enough to be seen.)
started_alive() { # PID
    local stat rest
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    rest=${stat##*) }         # "STATE PPID ..."
    [ "${rest%% *}" != Z ] || return 1
    rest=${rest#* }
    [ "${rest%% *}" = "$$" ]
}

# Every node must come up (bind its port, write node.addr).
deadline=$((SECONDS + TIMEOUT_S))
for ((i = 0; i < N; i++)); do
    dd=${DATADIRS[i]}
    pid=${STARTED[i]}
    while [ ! -s "$dd/node.addr" ]; do
        if ! started_alive "$pid"; then
            fail "node$i (pid $pid) exited at start: $(tail -n 3 "$dd/node.log" 2>/dev/null)"
        fi
        [ "$SECONDS" -lt "$deadline" ] ||
            fail "node$i (pid $pid) did not start within ${TIMEOUT_S}s; see $dd/node.log"
        sleep 0.1
    done
done

# ---- wait for the network -------------------------------------------------------
live_peers() { # DATADIR -> live peer count, or -1
    local out
    out=$("$BIN" status --datadir "$1" --json 2>/dev/null) || {
        echo -1
        return
    }
    grep -oE '"peers":[[:space:]]*[0-9]+' <<<"$out" | head -n 1 |
        grep -oE '[0-9]+$' || echo -1
}

# Formed: every node sees every other one, or 16 of them in a large
# testnet (inbound and outbound slots are max_peers/2 each, so a full mesh
# of 64 may never form, and gossip needs none).
want=$((N - 1 < 16 ? N - 1 : 16))
last_report="" last_time=-10
while :; do
    ready=0
    lagging=()
    for ((i = 0; i < N; i++)); do
        dd=${DATADIRS[i]}
        pid=${STARTED[i]}
        started_alive "$pid" ||
            fail "node$i (pid $pid) exited: $(tail -n 3 "$dd/node.log" 2>/dev/null)"
        n=$(live_peers "$dd")
        if [ "$n" -ge "$want" ]; then
            ready=$((ready + 1))
        else
            lagging+=("node$i sees $([ "$n" -ge 0 ] && echo "$n" || echo "?")/$want")
        fi
    done
    [ "$ready" -eq "$N" ] && break
    if [ "$SECONDS" -ge "$deadline" ]; then
        text=$(printf '%s, ' "${lagging[@]}")
        fail "the network did not form within ${TIMEOUT_S}s: ${text%, } (logs: $DIR/nodeI/node.log)"
    fi
    report="$ready/$N"
    if [ "$report" != "$last_report" ] || [ $((SECONDS - last_time)) -ge 2 ]; then
        echo "waiting for the network: $ready/$N nodes see $want peers"
        last_report=$report
        last_time=$SECONDS
    fi
    sleep 0.2
done
trap - INT TERM

cat <<EOF
testnet up: $N nodes on 127.0.0.1:$BASE_PORT..$((BASE_PORT + N - 1)), every node sees $want peers or more
  directory  $DIR
  bootstrap  $BOOTSTRAP   (also in $DIR/bootstrap)
  requester  $DIR/requester (funded with $CREDITS credits)$([ "$NREQ" -gt 1 ] && printf '\n  more       %s/requester1..requester%d (funded alike)' "$DIR" $((NREQ - 1)))
  peers      $BIN peers --datadir $DIR/node0
  submit     $BIN submit --datadir $DIR/requester --bootstrap \$(cat $DIR/bootstrap) JOB-FLAGS --max-price CREDITS
  stop       $SCRIPT_DIR/stop.sh -d $DIR
EOF
exit 0
