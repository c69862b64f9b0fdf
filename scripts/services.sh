#!/usr/bin/env bash
# Make sure PostgreSQL, Redis and RabbitMQ are running on 127.0.0.1 for the integration tests.
# Starts them if they are installed but stopped; never fails the build: tests that need a
# server that is still unreachable skip with a message saying so.
set -u

port_open() {  # host port
  (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null && exec 3>&- 3<&-
}

wait_port() {  # host port seconds
  for _ in $(seq 1 $(( $3 * 5 ))); do port_open "$1" "$2" && return 0; sleep 0.2; done
  return 1
}

if port_open 127.0.0.1 5432; then
  echo "PostgreSQL: running on 127.0.0.1:5432"
elif command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
  version=$(ls /etc/postgresql | sort -V | tail -1)
  echo "PostgreSQL: starting cluster $version/main"
  pg_ctlcluster --skip-systemctl-redirect "$version" main start ||
    echo "warning: could not start PostgreSQL; its integration tests will skip" >&2
  wait_port 127.0.0.1 5432 15 || echo "warning: PostgreSQL not reachable on 127.0.0.1:5432" >&2
else
  echo "note: PostgreSQL is not installed; its integration tests will skip" >&2
fi

if port_open 127.0.0.1 6379; then
  echo "Redis: running on 127.0.0.1:6379"
elif command -v redis-server >/dev/null; then
  echo "Redis: starting"
  mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log ||
    echo "warning: could not start Redis; its integration tests will skip" >&2
  wait_port 127.0.0.1 6379 10 || echo "warning: Redis not reachable on 127.0.0.1:6379" >&2
else
  echo "note: redis-server is not installed; its integration tests will skip" >&2
fi

if port_open 127.0.0.1 5672; then
  echo "RabbitMQ: running on 127.0.0.1:5672"
elif command -v rabbitmq-server >/dev/null; then
  echo "RabbitMQ: starting"
  rabbitmq-server -detached ||
    echo "warning: could not start RabbitMQ; the amqp:// broker test will skip" >&2
  wait_port 127.0.0.1 5672 30 || echo "warning: RabbitMQ not reachable on 127.0.0.1:5672" >&2
else
  echo "note: rabbitmq-server is not installed; the amqp:// broker test will skip" >&2
fi
exit 0
