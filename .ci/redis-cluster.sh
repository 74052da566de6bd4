#!/usr/bin/env bash
# A real Redis Cluster on loopback for the session store tests: 3 primaries, 3 replicas.
#
#   .ci/redis-cluster.sh start DIR   starts 6 redis-server processes in cluster mode on free
#                                    127.0.0.1 ports (each bus port, +10000, free too), creates the
#                                    cluster with redis-cli, waits until every slot is served, and
#                                    prints its URL (redis+cluster://127.0.0.1:PORT,...), also
#                                    written to DIR/url; DIR/ports lists the ports.
#   .ci/redis-cluster.sh stop DIR    stops every server started in DIR (by the pid files there).
#   .ci/redis-cluster.sh restart DIR PORT
#                                    starts the node of PORT again (after a crash: it rejoins the
#                                    cluster from its nodes.conf, as a replica if it was replaced).
#
# REDIS_CLUSTER_NODE_TIMEOUT (ms, default 1500) is the cluster-node-timeout: how long a silent
# primary takes to be declared failed and replaced by its replica. REDIS_CLUSTER_FULL_COVERAGE (yes,
# Redis's default, or no) is cluster-require-full-coverage: whether every node refuses every
# command while some slot has no live primary. No persistence (tests only).
set -euo pipefail

command="${1:-}"
dir="${2:-}"
if [[ -z "$command" || -z "$dir" ]]; then
    echo "usage: $0 start|stop DIR | restart DIR PORT" >&2
    exit 2
fi
timeout_ms="${REDIS_CLUSTER_NODE_TIMEOUT:-1500}"
full_coverage="${REDIS_CLUSTER_FULL_COVERAGE:-yes}"

# One node of the cluster, in cluster mode, its files under DIR/node-PORT.
start_node() {
    local port="$1" node="$dir/node-$1"
    mkdir -p "$node"
    redis-server --port "$port" --bind 127.0.0.1 --cluster-enabled yes \
        --cluster-config-file "$node/nodes.conf" --cluster-node-timeout "$timeout_ms" \
        --cluster-require-full-coverage "$full_coverage" \
        --save '' --appendonly no --repl-diskless-sync-delay 0 --dir "$node" --enable-debug-command local \
        --daemonize yes --pidfile "$node/redis.pid" --logfile "$node/redis.log"
}

stop() {
    local pidfile pid
    for pidfile in "$dir"/node-*/redis.pid; do
        [[ -f "$pidfile" ]] || continue
        pid=$(cat "$pidfile" 2>/dev/null || true)
        [[ -n "$pid" ]] && kill "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    done
}

case "$command" in
stop)
    stop
    exit 0
    ;;
restart)
    port="${3:?usage: $0 restart DIR PORT}"
    start_node "$port"
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && exit 0; sleep 0.05; done
    echo "the node on port $port did not start" >&2
    exit 1
    ;;
start) ;;
*)
    echo "usage: $0 start|stop DIR | restart DIR PORT" >&2
    exit 2
    ;;
esac

mkdir -p "$dir"
# Six free ports whose cluster bus ports (port + 10000) are free too.
read -r -a ports < <(python3 - <<'EOF'
import random, socket

def free(port):
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True

chosen = []
while len(chosen) < 6:
    port = random.randrange(20000, 45000)
    if port not in chosen and free(port) and free(port + 10000):
        chosen.append(port)
print(*chosen)
EOF
)
printf '%s\n' "${ports[@]}" >"$dir/ports"

for port in "${ports[@]}"; do
    start_node "$port"
done
for port in "${ports[@]}"; do
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.05; done
done

nodes=()
for port in "${ports[@]}"; do nodes+=("127.0.0.1:$port"); done
if ! redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$dir/create.log" 2>&1; then
    cat "$dir/create.log" >&2
    stop
    exit 1
fi
# Every node must see the whole cluster as ok (all 16384 slots served) before it is used.
for port in "${ports[@]}"; do
    for _ in $(seq 200); do
        redis-cli -p "$port" cluster info 2>/dev/null | grep -q '^cluster_state:ok' && break
        sleep 0.05
    done
done

# ... and every replica must have its primary's data (a replica that never synced cannot be
# promoted: a primary killed before then would leave its slots unserved).
for port in "${ports[@]}"; do
    for _ in $(seq 200); do
        info=$(redis-cli -p "$port" info replication 2>/dev/null || true)
        if grep -q '^role:master' <<<"$info" || grep -q '^master_link_status:up' <<<"$info"; then
            break
        fi
        sleep 0.05
    done
done

url="redis+cluster://$(IFS=,; echo "${nodes[*]}")"
echo "$url" >"$dir/url"
echo "$url"
