"""The code corpora of the formats benchmark (bench/formats.py): real source files for
Python, JavaScript and C, generated files for Go, TypeScript, Rust, Java, SQL, shell and HCL.

Where the virtualenv holds a language's source (site-packages), the parsers are measured
on hand-written code taken from it: seeded, deduplicated, minified files left out, no
folder making up more than a share. For the other languages, templates filled from a
seeded vocabulary give files with the structures a parser cuts on (types, methods,
functions, blocks), about the same number of bytes per language.
"""

from __future__ import annotations

import random
import re
import sysconfig
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from formats_corpus import PEOPLE, SERVICES, TEAMS
from govindex.core.hashing import sha256_hex

NOUNS = [
    *["order", "invoice", "tenant", "session", "replica", "shard", "token", "lease"],
    *["ledger", "route", "policy", "snapshot", "bucket", "cluster", "job", "metric"],
]
VERBS = [
    *["load", "store", "fetch", "apply", "validate", "render", "encode", "merge"],
    *["sync", "drain", "rotate", "publish", "resolve", "schedule", "retry", "reconcile"],
]
ROLES = ["Store", "Service", "Client", "Manager", "Controller", "Registry", "Pool"]


def camel(*words: str) -> str:
    return "".join(w[:1].upper() + w[1:] for w in words)


def fill(template: str, **values: object) -> str:
    """`template` with each `@name@` replaced (code is full of braces and dollars, so
    neither str.format nor string.Template reads cleanly here)."""
    return re.sub(r"@(\w+)@", lambda m: str(values[m[1]]), template)


GO_HEAD = """\
// Package @pkg@ keeps @pkg@ records and the rules that change them.
package @pkg@

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

var ErrNotFound = errors.New("@pkg@: not found")

const defaultRetries = @retries@
"""
GO_TYPE = """
// @Kind@ is one @noun@ as the @Store@ keeps it.
type @Kind@ struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updated_at"`
}

// @Store@ holds @noun@s in memory, safe for concurrent use.
type @Store@ struct {
	mu    sync.RWMutex
	items map[string]*@Kind@
}

// New@Store@ returns an empty @Store@.
func New@Store@() *@Store@ {
	return &@Store@{items: make(map[string]*@Kind@)}
}
"""
GO_METHOD = """
// @Verb@ @verb@s the @noun@ with the given id, retrying while it is locked.
func (s *@Store@) @Verb@(ctx context.Context, id string) (*@Kind@, error) {
	if id == "" {
		return nil, fmt.Errorf("@verb@: empty id")
	}
	for attempt := 0; attempt < defaultRetries; attempt++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		default:
		}
		s.mu.Lock()
		item, ok := s.items[id]
		s.mu.Unlock()
		if ok {
			item.Version++
			item.UpdatedAt = time.Now().UTC()
			return item, nil
		}
		time.Sleep(time.Duration(attempt*@backoff@) * time.Millisecond)
	}
	return nil, ErrNotFound
}
"""
RUST_HEAD = """\
//! @Noun@ bookkeeping: leases, versions and their errors.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};
"""
RUST_TYPE = """
/// One @noun@, with the instant it stops being valid.
#[derive(Debug, Clone, PartialEq)]
pub struct @Kind@ {
    pub id: String,
    pub owner: String,
    pub expires_at: Instant,
    attempts: u32,
}

#[derive(Debug)]
pub enum @Error@ {
    NotFound(String),
    Expired { id: String, by: Duration },
    Conflict,
}

impl fmt::Display for @Error@ {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            @Error@::NotFound(id) => write!(f, "@noun@ {id} not found"),
            @Error@::Expired { id, by } => write!(f, "@noun@ {id} expired {by:?} ago"),
            @Error@::Conflict => f.write_str("conflicting @noun@ update"),
        }
    }
}

pub struct @Store@ {
    items: HashMap<String, @Kind@>,
    ttl: Duration,
}

impl @Store@ {
    pub fn new(ttl: Duration) -> Self {
        Self { items: HashMap::new(), ttl }
    }
@methods@}

#[cfg(test)]
mod @noun@_tests {
    use super::*;

    #[test]
    fn missing_@noun@_is_not_found() {
        let mut store = @Store@::new(Duration::from_secs(@ttl@));
        assert!(matches!(store.@verb@("x"), Err(@Error@::NotFound(_))));
    }
}
"""
RUST_METHOD = """
    /// @Verb@ the @noun@ `id`, extending it by the store's ttl.
    pub fn @verb@(&mut self, id: &str) -> Result<&@Kind@, @Error@> {
        let now = Instant::now();
        let item = self
            .items
            .get_mut(id)
            .ok_or_else(|| @Error@::NotFound(id.to_string()))?;
        if item.expires_at < now {
            return Err(@Error@::Expired {
                id: id.to_string(),
                by: now - item.expires_at,
            });
        }
        item.attempts += @step@;
        item.expires_at = now + self.ttl;
        Ok(item)
    }
"""
JAVA_CLASS = """\
package com.example.@pkg@.@noun@;

import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

/** Keeps @noun@s and renews them; not thread-safe, callers hold the lock. */
public class @Service@ {
    private static final int MAX_ATTEMPTS = @retries@;
    private final Map<String, @Kind@> items = new HashMap<>();
    private final Clock clock;

    public @Service@(Clock clock) {
        this.clock = clock;
    }
@methods@
    /** One @noun@ and the instant it expires. */
    public record @Kind@(String id, String owner, Instant expiresAt) {}
}
"""
JAVA_METHOD = """
    /** @Verb@s the @noun@ {@code id} for {@code ttl} more. */
    public Optional<@Kind@> @verb@@Kind@(String id, Duration ttl) {
        @Kind@ item = items.get(id);
        if (item == null) {
            return Optional.empty();
        }
        for (int attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
            Instant now = clock.instant();
            if (item.expiresAt().isAfter(now)) {
                @Kind@ renewed = new @Kind@(item.id(), item.owner(), now.plus(ttl));
                items.put(id, renewed);
                return Optional.of(renewed);
            }
        }
        return Optional.empty();
    }
"""
TS_TYPE = """
/** One @noun@ as the @Store@ keeps it. */
export interface @Kind@ {
  id: string;
  owner: string;
  expiresAt: Date;
  attempts?: number;
}

export type @Kind@State = "active" | "expired" | "released";

export class @Store@ extends EventEmitter {
  private readonly items = new Map<string, @Kind@>();

  constructor(private readonly ttlMs: number = @ttl@_000) {
    super();
  }
@methods@}

export function parse@Kind@(raw: unknown): @Kind@ {
  if (typeof raw !== "object" || raw === null) {
    throw new TypeError("@noun@: expected an object");
  }
  const value = raw as Record<string, unknown>;
  return {
    id: String(value.id),
    owner: String(value.owner),
    expiresAt: new Date(String(value.expiresAt)),
  };
}

export const @noun@State = (item: @Kind@): @Kind@State =>
  item.expiresAt.getTime() > Date.now() ? "active" : "expired";
"""
TS_METHOD = """
  /** @Verb@ the @noun@ `id`; rejects when it is unknown. */
  async @verb@(id: string, ttlMs = this.ttlMs): Promise<@Kind@> {
    const item = this.items.get(id);
    if (!item) {
      throw new Error(`@noun@ ${id} not found`);
    }
    const attempts = (item.attempts ?? 0) + 1;
    const renewed = { ...item, expiresAt: new Date(Date.now() + ttlMs), attempts };
    this.items.set(id, renewed);
    this.emit("@verb@", renewed);
    return renewed;
  }
"""
SHELL_HEAD = """\
#!/usr/bin/env bash
# @Verb@ @service@ replicas, one region at a time.
set -euo pipefail

readonly LOG_DIR="${LOG_DIR:-/var/log/@service@}"
readonly RETRIES="${RETRIES:-@retries@}"

log() {
  printf '%s %s\\n' "$(date -u +%FT%TZ)" "$*" >&2
}

usage() {
  cat <<EOF
usage: $0 <command> [host...]
commands: @verbs@
EOF
}
"""
SHELL_FUNCTION = """
@verb@_host() {
  local host="$1" attempt
  for ((attempt = 1; attempt <= RETRIES; attempt++)); do
    if curl -fsS --max-time 5 "http://${host}:@port@/@verb@" >/dev/null; then
      log "@verb@: ${host} done (attempt ${attempt})"
      return 0
    fi
    sleep "$((attempt * 2))"
  done
  log "@verb@: ${host} failed after ${RETRIES} attempts"
  return 1
}
"""
SHELL_CASE = """\
    @verb@)
      for host in "$@"; do @verb@_host "$host"; done
      ;;
"""
HCL_HEAD = """\
terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = "~> 5.40"
    }
  }
}

variable "environment" {
  type        = string
  description = "Deployment environment"
  default     = "@env@"
}

locals {
  tags = {
    team        = "@team@"
    environment = var.environment
  }
}
"""
HCL_SERVICE = """
resource "aws_s3_bucket" "@name@_logs" {
  bucket = "${var.environment}-@name@-logs"
  tags   = local.tags
}

resource "aws_iam_role" "@name@" {
  name = "@name@-${var.environment}"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Action    = "sts:AssumeRole"
      Effect    = "Allow"
      Principal = { Service = "ec2.amazonaws.com" }
    }]
  })
  tags = local.tags
}

module "@name@_queue" {
  source      = "./modules/queue"
  name        = "@name@"
  retention   = @retention@
  max_receive = @receives@
}

output "@name@_bucket_arn" {
  value = aws_s3_bucket.@name@_logs.arn
}
"""
SQL_TABLE = """
CREATE TABLE IF NOT EXISTS @table@ (
    id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    tenant_id   text NOT NULL,
    owner       text NOT NULL,
    version     bigint NOT NULL DEFAULT 1,
    expires_at  timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX IF NOT EXISTS @table@_tenant ON @table@ (tenant_id, expires_at);

CREATE OR REPLACE VIEW active_@table@ AS
    SELECT id, tenant_id, owner, expires_at
    FROM @table@
    WHERE expires_at > now();

CREATE OR REPLACE FUNCTION renew_@table@(p_id uuid, p_ttl interval)
RETURNS @table@
LANGUAGE plpgsql
AS $$
DECLARE
    result @table@;
BEGIN
    UPDATE @table@
       SET expires_at = now() + p_ttl, version = version + 1
     WHERE id = p_id
    RETURNING * INTO result;
    IF NOT FOUND THEN
        RAISE EXCEPTION '@noun@ % not found', p_id;
    END IF;
    RETURN result;
END;
$$;

INSERT INTO @table@ (tenant_id, owner, expires_at) VALUES
@values@;
"""


def go_file(rng: random.Random, k: int) -> str:
    pkg = rng.choice(NOUNS)
    out = [fill(GO_HEAD, pkg=pkg, retries=rng.randint(2, 9))]
    for _ in range(rng.randint(3, 6)):
        noun = rng.choice(NOUNS)
        names = {"noun": noun, "Kind": camel(noun), "Store": camel(noun, rng.choice(ROLES))}
        out.append(fill(GO_TYPE, **names))
        for verb in rng.sample(VERBS, k=rng.randint(2, 5)):
            out.append(
                fill(GO_METHOD, verb=verb, Verb=camel(verb), backoff=rng.randint(5, 50), **names)
            )
    return "".join(out)


def rust_file(rng: random.Random, k: int) -> str:
    out = [fill(RUST_HEAD, Noun=camel(rng.choice(NOUNS)))]
    for _ in range(rng.randint(3, 6)):
        noun = rng.choice(NOUNS)
        names = {
            "noun": noun,
            "Kind": camel(noun),
            "Store": camel(noun, rng.choice(ROLES)),
            "Error": camel(noun, "Error"),
        }
        verbs = rng.sample(VERBS, k=rng.randint(2, 5))
        methods = "".join(
            fill(RUST_METHOD, verb=v, Verb=camel(v), step=rng.randint(1, 3), **names) for v in verbs
        )
        out.append(fill(RUST_TYPE, methods=methods, ttl=rng.randint(1, 90), verb=verbs[0], **names))
    return "".join(out)


def java_file(rng: random.Random, k: int) -> str:
    noun = rng.choice(NOUNS)
    names = {"noun": noun, "Kind": camel(noun)}
    methods = "".join(
        fill(JAVA_METHOD, verb=v, Verb=camel(v), **names)
        for v in rng.sample(VERBS, k=rng.randint(6, 14))
    )
    return fill(
        JAVA_CLASS,
        pkg=rng.choice(NOUNS),
        Service=camel(noun, rng.choice(ROLES)),
        retries=rng.randint(2, 9),
        methods=methods,
        **names,
    )


def typescript_file(rng: random.Random, k: int) -> str:
    out = ['import { EventEmitter } from "node:events";\n']
    for _ in range(rng.randint(3, 6)):
        noun = rng.choice(NOUNS)
        names = {"noun": noun, "Kind": camel(noun), "Store": camel(noun, rng.choice(ROLES))}
        methods = "".join(
            fill(TS_METHOD, verb=v, Verb=camel(v), **names)
            for v in rng.sample(VERBS, k=rng.randint(2, 5))
        )
        out.append(fill(TS_TYPE, methods=methods, ttl=rng.randint(1, 60), **names))
    return "".join(out)


def shell_file(rng: random.Random, k: int) -> str:
    verbs = rng.sample(VERBS, k=rng.randint(4, 8))
    head = fill(
        SHELL_HEAD,
        Verb=camel(verbs[0]),
        service=rng.choice(SERVICES),
        retries=rng.randint(3, 9),
        verbs=" ".join(verbs),
    )
    functions = "".join(
        fill(SHELL_FUNCTION, verb=v, port=rng.choice([8080, 9090, 8443])) for v in verbs
    )
    cases = "".join(fill(SHELL_CASE, verb=v) for v in verbs)
    main = (
        '\nmain() {\n  local command="${1:-}"\n  shift || true\n  case "$command" in\n'
        f'{cases}    *)\n      usage\n      exit 2\n      ;;\n  esac\n}}\n\nmain "$@"\n'
    )
    return head + functions + main


def hcl_file(rng: random.Random, k: int) -> str:
    out = [fill(HCL_HEAD, env=rng.choice(["prod", "staging", "dev"]), team=rng.choice(TEAMS))]
    for _ in range(rng.randint(5, 10)):
        out.append(
            fill(
                HCL_SERVICE,
                name=rng.choice(SERVICES).replace("-", "_"),
                retention=rng.randint(1, 14) * 86400,
                receives=rng.randint(3, 10),
            )
        )
    return "".join(out)


def sql_file(rng: random.Random, k: int) -> str:
    wrapped = rng.random() < 0.5  # many migration tools run each file in a transaction
    out = [f"-- Schema and maintenance routines, migration {k:04d}.\n"]
    if wrapped:
        out.append("BEGIN;\n")
    for _ in range(rng.randint(3, 6)):
        noun = rng.choice(NOUNS)
        values = ",\n".join(
            f"    ('{rng.choice(TEAMS)}', '{rng.choice(PEOPLE)}', "
            f"now() + interval '{rng.randint(1, 90)} days')"
            for _ in range(rng.randint(3, 8))
        )
        out.append(fill(SQL_TABLE, table=f"{noun}s_{rng.randint(1, 99)}", noun=noun, values=values))
    if wrapped:
        out.append("\nCOMMIT;\n")
    return "".join(out)


SITE = Path(sysconfig.get_paths()["purelib"])
# Real code: (suffixes, packages of site-packages to take it from; none: anywhere).
REAL: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "Python": ((".py",), ("rich", "pydantic", "yaml", "aiohttp", "structlog", "typer")),
    "JavaScript": ((".js",), ()),
    "C": ((".c",), ()),
}
GENERATED: dict[str, tuple[str, Callable[[random.Random, int], str]]] = {
    "Go": (".go", go_file),
    "TypeScript": (".ts", typescript_file),
    "Rust": (".rs", rust_file),
    "Java": (".java", java_file),
    "SQL": (".sql", sql_file),
    "shell": (".sh", shell_file),
    "HCL": (".tf", hcl_file),
}
CODE_BUDGET = 600_000  # bytes of code per language at scale 1
FOLDER_SHARE = 0.25  # of a language's real code, from one folder at most


def readable_source(path: Path) -> str | None:
    """The file's text when it is hand-written source: UTF-8, lines of a normal length (a
    minified bundle is not what a repository holds)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None
    lines = text.count("\n") + 1
    if path.name.endswith(".min.js") or len(text) / lines > 100 or lines < 20:
        return None
    return text


def real_code(root: Path, label: str, rng: random.Random, scale: float) -> list[Path]:
    suffixes, packages = REAL[label]
    bases = [SITE / p for p in packages if (SITE / p).is_dir()] or [SITE]
    found = sorted(
        p
        for base in bases
        for p in base.rglob("*")
        if p.suffix in suffixes and p.is_file() and 2_000 <= p.stat().st_size <= 200_000
    )
    rng.shuffle(found)
    paths: list[Path] = []
    seen: set[str] = set()
    per_folder: Counter[Path] = Counter()  # characters taken from each folder
    total = 0
    for source in found:
        if total >= CODE_BUDGET * scale:
            break
        text = readable_source(source)
        # A vendored copy is not a second file, and one folder (a package's translations)
        # should not make up the corpus.
        if text is None or sha256_hex(text) in seen:
            continue
        if per_folder[source.parent] + len(text) > FOLDER_SHARE * CODE_BUDGET * scale:
            continue
        seen.add(sha256_hex(text))
        per_folder[source.parent] += len(text)
        name = "__".join(source.relative_to(SITE).parts)
        target = root / name
        target.write_text(text, encoding="utf-8")
        paths.append(target)
        total += len(text.encode())
    return paths


def generated_code(root: Path, label: str, rng: random.Random, scale: float) -> list[Path]:
    suffix, make = GENERATED[label]
    paths: list[Path] = []
    total = 0
    while total < CODE_BUDGET * scale:
        text = make(rng, len(paths))
        path = root / f"{label.lower()}-{len(paths):03d}{suffix}"
        path.write_text(text, encoding="utf-8")
        paths.append(path)
        total += len(text.encode())
    return paths
