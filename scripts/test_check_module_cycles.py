#!/usr/bin/env python3
"""Tests of check-module-cycles.py over small crates written to a temporary directory."""

import importlib.util
import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("cycles", os.path.join(HERE, "check-module-cycles.py"))
cycles = importlib.util.module_from_spec(spec)
sys.modules["cycles"] = cycles
spec.loader.exec_module(cycles)


class ModuleCycles(unittest.TestCase):
    def crate(self, files: dict[str, str]) -> str:
        root = tempfile.mkdtemp()
        self.addCleanup(lambda: __import__("shutil").rmtree(root))
        files = {"Cargo.toml": '[package]\nname = "t"\n', **files}
        for rel, text in files.items():
            path = os.path.join(root, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        return root

    def run_check(self, root: str) -> tuple[int, str]:
        out = io.StringIO()
        cwd = os.getcwd()
        try:
            with redirect_stdout(out):
                code = cycles.main(["--root", root, "."])
        finally:
            os.chdir(cwd)
        return code, out.getvalue()

    def test_a_loop_between_siblings_is_a_cycle_named_with_its_arrows(self):
        root = self.crate({
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/a.rs": "use crate::b::Thing;\npub struct Other;\n",
            "src/b.rs": "pub struct Thing;\nfn f() -> crate::a::Other { todo!() }\n",
        })
        code, out = self.run_check(root)
        self.assertEqual(code, 1, out)
        self.assertIn("2 files: src/a.rs, src/b.rs", out)
        self.assertIn("src/a.rs -> src/b.rs: Thing", out)
        self.assertIn("src/b.rs -> src/a.rs: Other", out)

    def test_a_loop_between_modules_through_a_child_file_is_a_cycle(self):
        # No two files form a loop (b.rs never reaches a.rs, a.rs reaches only b/inner.rs),
        # but the modules a and b use each other.
        root = self.crate({
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/a.rs": "use crate::b::inner::Deep;\npub struct Other;\n",
            "src/b.rs": "pub mod inner;\nfn f() -> crate::a::Other { todo!() }\n",
            "src/b/inner.rs": "pub struct Deep;\n",
        })
        code, out = self.run_check(root)
        self.assertEqual(code, 1, out)
        self.assertIn("2 modules: crate::a, crate::b", out)
        self.assertIn("crate::a -> crate::b: src/a.rs -> src/b/inner.rs", out)

    def test_one_way_imports_are_no_cycle(self):
        root = self.crate({
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/a.rs": "use crate::b::Thing;\n",
            "src/b.rs": "pub struct Thing;\n",
        })
        self.assertEqual(self.run_check(root)[0], 0)

    def test_a_module_and_its_descendants_may_use_each_other(self):
        root = self.crate({
            "src/lib.rs": "mod a;\n",
            "src/a.rs": "mod inner;\nuse inner::Leaf;\npub struct Top;\n",
            "src/a/inner.rs": "use super::Top;\npub struct Leaf;\n",
        })
        self.assertEqual(self.run_check(root)[0], 0)

    def test_a_re_export_is_followed_to_the_file_that_defines_the_name(self):
        # `crate::Error` is error.rs's, re-exported by the root: b -> error, error -> b.
        root = self.crate({
            "src/lib.rs": "mod b;\nmod error;\npub use error::Error;\n",
            "src/error.rs": "pub struct Error(crate::b::Code);\n",
            "src/b.rs": "use crate::Error;\npub struct Code;\n",
        })
        code, out = self.run_check(root)
        self.assertEqual(code, 1, out)
        self.assertIn("src/b.rs -> src/error.rs: Error", out)

    def test_a_glob_import_is_followed_to_the_file_that_defines_the_name(self):
        root = self.crate({
            "src/lib.rs": "mod a;\nmod b;\nmod c;\n",
            "src/a.rs": "pub use crate::c::*;\n",
            "src/c.rs": "pub fn helper() {}\nfn g() { crate::b::h() }\n",
            "src/b.rs": "pub fn h() { crate::a::helper() }\n",
        })
        code, out = self.run_check(root)
        self.assertEqual(code, 1, out)
        self.assertIn("src/b.rs -> src/c.rs: helper", out)

    def test_paths_in_comments_strings_and_test_code_draw_no_arrow(self):
        root = self.crate({
            "src/lib.rs": "mod a;\nmod b;\n",
            "src/a.rs": "use crate::b::Thing;\n",
            "src/b.rs": (
                "pub struct Thing;\n"
                "// crate::a::x\n/* crate::a::y */\n"
                'const S: &str = "crate::a::z";\nconst C: char = \'"\';\n'
                '#[cfg(test)]\nmod tests { use crate::a::*; }\n'
                '#[cfg(test)]\nfn only_in_tests() { crate::a::x() }\n'
            ),
        })
        code, out = self.run_check(root)
        self.assertEqual(code, 0, out)

    def test_nested_use_trees_and_super_paths_resolve(self):
        root = self.crate({
            "src/lib.rs": "mod net;\nmod disk;\n",
            "src/net.rs": "mod conn;\nmod reply;\n",
            "src/net/conn.rs": "use super::{reply::{self, Reply}};\n",
            "src/net/reply.rs": "pub struct Reply;\nfn f() { super::conn::x(); }\n",
            "src/disk.rs": "",
        })
        code, out = self.run_check(root)
        self.assertEqual(code, 1, out)
        self.assertIn("src/net/conn.rs -> src/net/reply.rs: Reply", out)
        self.assertIn("src/net/reply.rs -> src/net/conn.rs: x", out)

    def test_a_missing_directory_is_a_clear_error(self):
        code = cycles.main(["--root", tempfile.gettempdir(), "no-such-dir-here"])
        self.assertEqual(code, 2)


if __name__ == "__main__":
    unittest.main()
