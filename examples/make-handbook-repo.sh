#!/bin/sh
# Make a small git repository of runbooks to try govindex on: four Markdown files with
# frontmatter in a first commit (2025-01-10), then a second commit (2025-05-01) that
# rewrites the failover steps. POSIX sh and git only; no network.
#
#   examples/make-handbook-repo.sh build/handbook
#
# Then, with `govindex up` running in the same directory (examples/README.md):
#
#   govindex source apply examples/sources/handbook.yaml
#   govindex ingest git build/handbook --source handbook
set -eu

usage="usage: $0 DIR   (a path that does not exist yet, e.g. build/handbook)"
[ "$#" -eq 1 ] || { echo "$usage" >&2; exit 2; }
case "$1" in -*) echo "$usage" >&2; exit 2 ;; esac
repo=$1
first_subject="Handbook: the first runbooks"

command -v git >/dev/null 2>&1 || { echo "$0: git is needed and was not found" >&2; exit 1; }
if [ -e "$repo" ]; then
    if [ -d "$repo/.git" ] && [ "$(git -C "$repo" log --reverse --format=%s 2>/dev/null | head -n 1)" = "$first_subject" ]; then
        echo "$repo already holds the example handbook; nothing to do"
        exit 0
    fi
    echo "$0: $repo exists and is not the example handbook; give a path that does not exist" >&2
    exit 1
fi

# Fixed authors and dates: valid time follows the story, not the moment this runs, and
# the same commits come out on every machine.
GIT_AUTHOR_NAME="Handbook Example"
GIT_AUTHOR_EMAIL="handbook@example.com"
GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME
GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL
export GIT_AUTHOR_NAME GIT_AUTHOR_EMAIL GIT_COMMITTER_NAME GIT_COMMITTER_EMAIL
# No user or system configuration (hooks, templates, signing) changes what is made.
GIT_CONFIG_NOSYSTEM=1
GIT_CONFIG_GLOBAL=/dev/null
export GIT_CONFIG_NOSYSTEM GIT_CONFIG_GLOBAL

mkdir -p "$repo"
git -C "$repo" init -q
git -C "$repo" symbolic-ref HEAD refs/heads/main
mkdir -p "$repo/runbooks" "$repo/policies"

cat > "$repo/runbooks/db-failover.md" <<'EOF'
---
title: Database failover
owner: team-data
service: orders-db
---
# Database failover

Use this runbook when the primary of `orders-db` stops accepting writes.

## Prerequisites

- Pager access to the data on-call rotation.
- Read the replication lag on the dashboard first.

## Steps

1. Freeze deploys of the orders service.
2. Promote replica `orders-db-2` with `pgctl promote`.
3. Point the `orders-db` DNS record at `orders-db-2`.

## Rollback

Demote `orders-db-2` and point DNS back at the old primary.
EOF

cat > "$repo/runbooks/cache-flush.md" <<'EOF'
---
title: Flush the edge cache
owner: team-platform
service: edge-cache
---
# Flush the edge cache

Run `edgectl purge --all` when stale pages are served after a deploy.
Expect a cold cache, and slower pages, for about ten minutes.
EOF

cat > "$repo/runbooks/deploy-rollback.md" <<'EOF'
---
title: Roll back a deploy
owner: team-platform
service: deploy-pipeline
---
# Roll back a deploy

Use this runbook when a release raises the error rate above 1% for five minutes.

## Steps

1. Find the last good release with `deployctl history orders-api`.
2. Run `deployctl rollback orders-api --to <release>`.
3. Post the rollback and its reason in #incidents.
EOF

cat > "$repo/policies/break-glass.md" <<'EOF'
---
title: Break-glass access
acl: ["group:sre-leads"]
classification: confidential
---
# Break-glass access

Emergency root access to production is granted by two SRE leads, for four hours at most.
Every session is recorded and reviewed the next working day.
EOF

git -C "$repo" add -A
GIT_AUTHOR_DATE="2025-01-10T09:00:00+00:00" GIT_COMMITTER_DATE="2025-01-10T09:00:00+00:00" \
    git -C "$repo" commit -q -m "$first_subject"

cat > "$repo/runbooks/db-failover.md" <<'EOF'
---
title: Database failover
owner: team-data
service: orders-db
---
# Database failover

Use this runbook when the primary of `orders-db` stops accepting writes.

## Prerequisites

- Pager access to the data on-call rotation.
- Read the replication lag on the dashboard first.

## Steps

1. Freeze deploys of the orders service.
2. Run `dbctl failover orders-db --to orders-db-3`; it promotes the replica and moves DNS.
3. Confirm writes succeed with `dbctl check orders-db`.

## Rollback

Run `dbctl failover orders-db --to orders-db-1` once the old primary is healthy.
EOF

git -C "$repo" add -A
GIT_AUTHOR_DATE="2025-05-01T09:00:00+00:00" GIT_COMMITTER_DATE="2025-05-01T09:00:00+00:00" \
    git -C "$repo" commit -q -m "Failover with dbctl: the new tooling"

echo "made $repo: a git repository of 4 runbooks and policies in 2 commits (branch main)"
git -C "$repo" log --format='  %h %ad %s' --date=short
