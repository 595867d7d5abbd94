// agentbox/deepagents: AgentboxSandbox against the behaviours deepagents'
// sandbox standard suite (langchain-ai/deepagentsjs, libs/standard-tests)
// checks, stated here in our own words, plus what agentbox adds.
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";

import { BaseSandbox, isSandboxBackend, SandboxError as DeepAgentsSandboxError } from "deepagents";

import { AgentboxSandbox } from "../dist/deepagents.js";
import { base, removeTree, tempTree } from "./helpers.mjs";

const text = (bytes) => new TextDecoder().decode(bytes);
const enc = (s) => new TextEncoder().encode(s);
const at = (name) => `/workspace/${name}`;

let ws;
let sb;
before(async () => {
  ws = tempTree();
  sb = await AgentboxSandbox.create(base({ workspace: ws }));
});
after(async () => {
  await sb?.close();
  removeTree(ws);
});

/** A backend of its own for one test, closed and removed after it. */
async function own(t, options = {}) {
  const dir = tempTree();
  const b = await AgentboxSandbox.create(base({ workspace: dir, ...options }));
  t.after(async () => {
    await b.close();
    removeTree(dir);
  });
  return { b, dir };
}

describe("lifecycle", () => {
  it("is a deepagents sandbox backend with an id, running once created", () => {
    assert.ok(sb instanceof BaseSandbox);
    assert.ok(isSandboxBackend(sb));
    assert.equal(typeof sb.id, "string");
    assert.match(sb.id, /^ab-/);
    assert.equal(sb.isRunning, true);
  });

  it("stops running when closed", async (t) => {
    const { b } = await own(t);
    assert.equal(b.isRunning, true);
    await b.close();
    assert.equal(b.isRunning, false);
    await assert.rejects(b.execute("true"), /closed/);
  });

  it("starts in two steps: constructed, then initialized once", async (t) => {
    const dir = tempTree();
    const b = new AgentboxSandbox(base({ workspace: dir }));
    t.after(async () => {
      await b.close();
      removeTree(dir);
    });
    assert.equal(b.isRunning, false);
    assert.equal(b.id, "");
    await assert.rejects(b.ls("/workspace"), (e) => e instanceof DeepAgentsSandboxError && e.code === "NOT_INITIALIZED");
    const both = await Promise.allSettled([b.initialize(), b.initialize()]); // one sandbox, not two
    assert.deepEqual(both.map((r) => r.status), ["fulfilled", "rejected"]);
    assert.equal(both[1].reason.code, "ALREADY_INITIALIZED");
    assert.equal(b.isRunning, true);
    assert.match(b.id, /^ab-/);
    await assert.rejects(b.initialize(), (e) => e.code === "ALREADY_INITIALIZED");
  });

  it("writes initial files, nested ones included, visible to every operation", async (t) => {
    const { b, dir } = await own(t, {
      initialFiles: {
        "init.txt": "Hello from an initial file",
        "src/components/Button/index.tsx": "export const Button = 1;",
        "/workspace/run.sh": "echo ran from initialFiles",
      },
    });
    assert.equal((await b.execute("cat /workspace/init.txt")).output, "Hello from an initial file");
    assert.equal((await b.execute("sh run.sh")).output, "ran from initialFiles\n");
    assert.match((await b.read(at("src/components/Button/index.tsx"))).content, /Button/);
    assert.equal(text((await b.downloadFiles([at("init.txt")]))[0].content), "Hello from an initial file");
    assert.deepEqual((await b.ls(at("src/components"))).files.map((f) => f.path), [at("src/components/Button/")]);
    assert.equal(readFileSync(join(dir, "src/components/Button/index.tsx"), "utf8"), "export const Button = 1;");
  });
});

describe("execute", () => {
  it("returns stdout and stderr together with the exit code", async () => {
    assert.deepEqual(await sb.execute("echo hello"), { output: "hello\n", exitCode: 0, truncated: false });
    assert.equal((await sb.execute("exit 42")).exitCode, 42);
    assert.equal((await sb.execute("printf 'a\\nb\\nc\\n'")).output, "a\nb\nc\n");
    assert.match((await sb.execute("echo oops >&2")).output, /oops/);
    assert.equal((await sb.execute("X=val sh -c 'echo $X'")).output, "val\n");
    const missing = await sb.execute("no-such-command-xyz");
    assert.equal(missing.exitCode, 127);
    assert.match(missing.output, /not found/);
  });
});

describe("uploadFiles and downloadFiles", () => {
  it("upload one or many files, each answered in input order", async () => {
    const r = await sb.uploadFiles([[at("up/1.txt"), enc("Content 1")], [at("up/2.txt"), enc("Content 2")], [at("up/3.txt"), enc("Content 3")]]);
    assert.deepEqual(r, [1, 2, 3].map((n) => ({ path: at(`up/${n}.txt`), error: null })));
    assert.equal((await sb.execute("cat /workspace/up/1.txt /workspace/up/2.txt /workspace/up/3.txt")).output, "Content 1Content 2Content 3");
  });

  it("download returns the bytes, or a standard error code per path", async () => {
    const bytes = new Uint8Array([0, 255, 10, 13, 128]);
    await sb.uploadFiles([[at("dl/raw.bin"), bytes]]);
    const r = await sb.downloadFiles([at("dl/raw.bin"), at("dl/none.bin"), at("dl")]);
    assert.deepEqual(r[0], { path: at("dl/raw.bin"), content: bytes, error: null });
    assert.deepEqual(r[1], { path: at("dl/none.bin"), content: null, error: "file_not_found" });
    assert.deepEqual(r[2], { path: at("dl"), content: null, error: "is_directory" });
  });

  it("partial success: a failed upload does not stop the others", async () => {
    await sb.write(at("ps/file"), "a file");
    // the uploads of one call run concurrently: none of them depends on another
    const r = await sb.uploadFiles([[at("ps/ok.txt"), enc("ok")], ["/usr/agentbox-denied.txt", enc("x")], [at("ps/file/below"), enc("x")], ["", enc("x")]]);
    assert.deepEqual(r.map((x) => x.error), [null, "permission_denied", "invalid_path", "invalid_path"]);
    assert.equal(readFileSync(join(ws, "ps/ok.txt"), "utf8"), "ok");
  });
});

describe("read", () => {
  const rows = (n, from = 1) => Array.from({ length: n }, (_, i) => `Row_${i + from}_content`).join("\n");

  it("returns the text of a file, and 'not found' for a missing one", async () => {
    await sb.write(at("rd/basic.txt"), "Line 1\nLine 2\nLine 3");
    const r = await sb.read(at("rd/basic.txt"));
    assert.equal(r.error, undefined);
    assert.equal(r.content, "Line 1\nLine 2\nLine 3");
    assert.deepEqual([r.startLine, r.endLine, r.totalLines, r.nextOffset], [1, 3, 3, undefined]);
    assert.match((await sb.read(at("rd/missing.txt"))).error.toLowerCase(), /not found/);
  });

  it("reads an empty file without error", async () => {
    await sb.write(at("rd/empty.txt"), "");
    assert.equal((await sb.read(at("rd/empty.txt"))).error, undefined);
  });

  it("takes windows of lines by offset and limit", async () => {
    await sb.write(at("rd/rows.txt"), rows(100));
    const skip5 = await sb.read(at("rd/rows.txt"), 5);
    assert.ok(skip5.content.startsWith("Row_6_content\n"));
    assert.ok(!skip5.content.includes("Row_1_content"));
    assert.equal((await sb.read(at("rd/rows.txt"), 0, 5)).content, rows(5));
    const mid = await sb.read(at("rd/rows.txt"), 10, 5);
    assert.equal(mid.content, rows(5, 11));
    assert.equal(mid.nextOffset, 15);
    assert.equal((await sb.read(at("rd/rows.txt"), 0, 0)).content, "");
    const past = await sb.read(at("rd/rows.txt"), 100, 10);
    assert.ok(!(past.content ?? "").includes("Row_"));
    assert.ok(!((await sb.read(at("rd/rows.txt"), 500, 10)).content ?? "").includes("Row_"));
  });

  it("reads a large file in chunks", async () => {
    const lines = Array.from({ length: 1000 }, (_, i) => `Line_${String(i).padStart(4, "0")}_content`);
    await sb.write(at("rd/big.txt"), lines.join("\n"));
    for (const start of [0, 500, 900]) {
      const r = await sb.read(at("rd/big.txt"), start, 100);
      assert.equal(r.content, lines.slice(start, start + 100).join("\n"));
    }
  });

  it("keeps unicode and very long lines", async () => {
    const content = "Hello \u{1F44B} \u4E16\u754C\n\u041F\u0440\u0438\u0432\u0435\u0442\n" + "x".repeat(3000) + "\nshort";
    await sb.write(at("rd/uni.txt"), content);
    assert.equal((await sb.read(at("rd/uni.txt"))).content, content);
  });

  it("returns the bytes of a binary type, and raw file data", async () => {
    const png = new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 1, 2]);
    await sb.uploadFiles([[at("rd/pic.png"), png]]);
    const r = await sb.read(at("rd/pic.png"));
    assert.deepEqual([r.content, r.mimeType], [png, "image/png"]);
    const raw = await sb.readRaw(at("rd/basic.txt"));
    assert.equal(raw.data.content, "Line 1\nLine 2\nLine 3");
    assert.equal(raw.data.mimeType, "text/plain");
    assert.match((await sb.readRaw(at("rd/none"))).error, /not found/);
  });
});

describe("write", () => {
  const cases = {
    "w/basic.txt": "basic content",
    "w/deep/er/parents.txt": "made its parents",
    "w/special.txt": "quotes ' \" back\\slash $HOME `cmd` %s \\n \t tab",
    "w/empty.txt": "",
    "w/with spaces/file name.txt": "spaced",
    "w/unicode.txt": "\u{1F600} \u00e9\u00e8 \u4E2D\u6587",
    "w/newlines.txt": "\n\n\n",
    "w/1000.txt": Array.from({ length: 1000 }, (_, i) => `line ${i}`).join("\n"),
  };

  it("creates files with exactly their content, on the host", async () => {
    for (const [name, content] of Object.entries(cases)) {
      const r = await sb.write(at(name), content);
      assert.deepEqual(r, { path: at(name), filesUpdate: null }, name);
      assert.equal(readFileSync(join(ws, name), "utf8"), content, name);
    }
    assert.equal((await sb.execute(`cat '${at("w/special.txt")}'`)).output, cases["w/special.txt"]);
  });

  it("overwrites an existing file", async () => {
    await sb.write(at("w/over.txt"), "first version");
    await sb.write(at("w/over.txt"), "second");
    assert.equal(readFileSync(join(ws, "w/over.txt"), "utf8"), "second");
  });

  it("accepts consecutive slashes in a path", async () => {
    assert.equal((await sb.write("/workspace//w//slashes.txt", "ok")).error, undefined);
    assert.equal(readFileSync(join(ws, "w/slashes.txt"), "utf8"), "ok");
  });

  it("fails with a message in read-only places", async () => {
    assert.match((await sb.write("/usr/x.txt", "x")).error, /read.only|permission/i);
  });
});

describe("edit", () => {
  const edit = async (name, content, ...args) => {
    await sb.write(at(name), content);
    const r = await sb.edit(at(name), ...args);
    return { r, after: readFileSync(join(ws, name), "utf8") };
  };

  it("replaces a single occurrence", async () => {
    const { r, after } = await edit("e/single.txt", "Hello world\nGoodbye world\nHello again", "Goodbye", "Farewell");
    assert.deepEqual(r, { path: at("e/single.txt"), filesUpdate: null, occurrences: 1 });
    assert.equal(after, "Hello world\nFarewell world\nHello again");
  });

  it("refuses several occurrences unless replaceAll, saying 'multiple'", async () => {
    const { r, after } = await edit("e/multi.txt", "apple apple apple", "apple", "pear");
    assert.match(r.error.toLowerCase(), /multiple/);
    assert.equal(after, "apple apple apple");
    const all = await sb.edit(at("e/multi.txt"), "apple", "pear", true);
    assert.equal(all.occurrences, 3);
    assert.equal(readFileSync(join(ws, "e/multi.txt"), "utf8"), "pear pear pear");
  });

  it("says 'not found' for a missing string or file", async () => {
    const { r } = await edit("e/nf.txt", "content", "nonexistent", "x");
    assert.match(r.error.toLowerCase(), /not found/);
    assert.match((await sb.edit(at("e/none.txt"), "a", "b")).error.toLowerCase(), /not found/);
  });

  it("treats the strings literally, across lines, in unicode, and keeps line endings", async () => {
    const cases = [
      ["Price: $100.00\nPattern: [a-z]*", "$100.00", "$200.00", "Price: $200.00\nPattern: [a-z]*"],
      ["Line 1\nLine 2\nLine 3", "Line 1\nLine 2", "Combined", "Combined\nLine 3"],
      ["Keep this\nDelete this part\nKeep this too", "Delete this part\n", "", "Keep this\nKeep this too"],
      ["Same text", "Same text", "Same text", "Same text"],
      ["Hello \u{1F44B} world", "\u{1F44B}", "\u{1F30D}", "Hello \u{1F30D} world"],
      ["Line1\n  \nLine2", "\n  \n", " ", "Line1 Line2"],
      ["a\r\nb\r\nc\r\n", "b", "B", "a\r\nB\r\nc\r\n"],
      ["The quick brown fox", "brown fox", "red cat", "The quick red cat"],
      ["x".repeat(3000) + "!", "x".repeat(3000), "y".repeat(2000), "y".repeat(2000) + "!"],
    ];
    for (const [i, [content, from, to, expected]] of cases.entries()) {
      const { r, after } = await edit(`e/lit${i}.txt`, content, from, to);
      assert.equal(r.occurrences, 1, `case ${i}: ${r.error}`);
      assert.equal(after, expected, `case ${i}`);
    }
  });

  it("fills an empty file from an empty old string, and refuses that on a non-empty one", async () => {
    const { r, after } = await edit("e/fill.txt", "", "", "filled");
    assert.deepEqual([r.occurrences, after], [1, "filled"]);
    assert.match((await sb.edit(at("e/fill.txt"), "", "more")).error, /empty/);
  });
});

describe("ls", () => {
  it("lists absolute paths, directories with a trailing slash and is_dir", async () => {
    await sb.write(at("ls/a/file1.txt"), "1");
    await sb.write(at("ls/a/.hidden"), "h");
    await sb.execute("mkdir -p '/workspace/ls/a/sub dir'");
    const r = await sb.ls(at("ls/a"));
    assert.equal(r.error, undefined);
    assert.deepEqual(r.files.map((f) => [f.path, f.is_dir]).sort(), [
      [at("ls/a/.hidden"), false],
      [at("ls/a/file1.txt"), false],
      [at("ls/a/sub dir/"), true],
    ]);
    assert.equal(r.files.find((f) => f.path.endsWith("file1.txt")).size, 1);
    assert.equal((await sb.ls(at("ls/a/"))).files.length, 3);
  });

  it("gives an empty list for an empty or missing directory", async () => {
    await sb.execute("mkdir -p /workspace/ls/empty");
    assert.deepEqual(await sb.ls(at("ls/empty")), { files: [] });
    assert.deepEqual(await sb.ls(at("ls/does-not-exist")), { files: [] });
  });

  it("handles unicode, special characters and large directories", async () => {
    const names = ["\u6587\u4EF6.txt", "caf\u00e9.txt", "file(1).txt", "file-3.txt", "a&b;c.txt"];
    await sb.uploadFiles(names.map((n) => [at(`ls/u/${n}`), enc(n)]));
    assert.deepEqual((await sb.ls(at("ls/u"))).files.map((f) => f.path).sort(), names.map((n) => at(`ls/u/${n}`)).sort());
    await sb.uploadFiles(Array.from({ length: 60 }, (_, i) => [at(`ls/many/f${i}.txt`), enc("x")]));
    assert.equal((await sb.ls(at("ls/many"))).files.length, 60);
  });
});

describe("glob", () => {
  before(async () => {
    const files = ["file1.txt", "file2.txt", "file3.py", "file10.txt", "fileA.txt", ".hidden1", "sub1/nested1.txt", "sub2/nested2.txt", "a/b/c/d/deep.txt", "a/b/other.md"];
    await sb.uploadFiles(files.map((f) => [at(`gl/${f}`), enc("content")]));
  });
  const paths = async (pattern, path = at("gl")) => {
    const r = await sb.glob(pattern, path);
    assert.equal(r.error, undefined);
    return r.files.map((f) => f.path).sort();
  };

  it("matches names relative to the search path, one level for *", async () => {
    assert.deepEqual(await paths("*.txt"), ["file1.txt", "file10.txt", "file2.txt", "fileA.txt"]);
    assert.deepEqual(await paths("*.py"), ["file3.py"]);
  });

  it("descends with **", async () => {
    assert.deepEqual(await paths("**/nested*.txt"), ["sub1/nested1.txt", "sub2/nested2.txt"]);
    assert.deepEqual(await paths("**/deep.txt"), ["a/b/c/d/deep.txt"]);
  });

  it("includes directories, flagged", async () => {
    const r = await sb.glob("*", at("gl/a"));
    assert.deepEqual(r.files.map((f) => [f.path, f.is_dir]), [["b", true]]);
  });

  it("matches hidden files, character classes and ?", async () => {
    assert.deepEqual(await paths(".*"), [".hidden1"]);
    assert.deepEqual(await paths("file[1-2].txt"), ["file1.txt", "file2.txt"]);
    assert.deepEqual(await paths("file?.txt"), ["file1.txt", "file2.txt", "fileA.txt"]);
  });

  it("gives an empty list for no match, or below a missing directory", async () => {
    assert.deepEqual(await paths("*.rs"), []);
    assert.deepEqual(await sb.glob("*", at("gl/none")), { files: [] });
    assert.deepEqual(await sb.glob("none/*.txt", at("gl")), { files: [] });
  });

  it("takes a pattern's leading directories as part of it, relative to the search path", async () => {
    assert.deepEqual(await paths("/workspace/gl/sub1/*.txt", "/"), ["workspace/gl/sub1/nested1.txt"]);
    assert.deepEqual(await paths("workspace/gl/**/deep.txt", "/"), ["workspace/gl/a/b/c/d/deep.txt"]);
    assert.deepEqual(await paths("a/b/*", at("gl")), ["a/b/c", "a/b/other.md"]);
    assert.deepEqual(await paths("/a/b/other.md"), ["a/b/other.md"]);
  });
});

describe("grep", () => {
  before(async () => {
    await sb.uploadFiles([
      [at("gr/one.txt"), enc("Hello world\nGoodbye world")],
      [at("gr/two.txt"), enc("Hello there\nGoodbye friend")],
      [at("gr/code.py"), enc("apple\nbanana\napple\norange\napple")],
      [at("gr/lit.txt"), enc("test123\ntest.*\nPrice: $100\nPattern: [a-z]*")],
      [at("gr/uni.txt"), enc("Hello \u4E16\u754C\n\u041F\u0440\u0438\u0432\u0435\u0442 \u043C\u0438\u0440")],
      [at("gr/deep/er/nested.md"), enc("nothing\ntarget_nested here")],
      [at("gr/img.png"), enc("Hello in a png")],
    ]);
  });
  const found = async (pattern, glob = null, path = at("gr")) => {
    const r = await sb.grep(pattern, path, glob);
    assert.equal(r.error, undefined);
    return r.matches.map((m) => `${m.path.slice(at("gr/").length)}:${m.line}:${m.text}`).sort();
  };

  it("finds literal text with file, line and text", async () => {
    assert.deepEqual(await found("Hello"), ["one.txt:1:Hello world", "two.txt:1:Hello there", "uni.txt:1:Hello \u4E16\u754C"]);
    assert.deepEqual(await found("apple"), ["code.py:1:apple", "code.py:3:apple", "code.py:5:apple"]);
  });

  it("filters files by glob", async () => {
    assert.deepEqual(await found("apple", "*.py"), ["code.py:1:apple", "code.py:3:apple", "code.py:5:apple"]);
    assert.deepEqual(await found("Hello", "*.py"), []);
  });

  it("is literal, case-sensitive, unicode-aware and recursive", async () => {
    assert.deepEqual(await found("test.*"), ["lit.txt:2:test.*"]);
    assert.deepEqual(await found("$100"), ["lit.txt:3:Price: $100"]);
    assert.deepEqual(await found("[a-z]*"), ["lit.txt:4:Pattern: [a-z]*"]);
    assert.deepEqual(await found("hello"), []);
    assert.deepEqual(await found("\u041F\u0440\u0438\u0432\u0435\u0442"), ["uni.txt:2:\u041F\u0440\u0438\u0432\u0435\u0442 \u043C\u0438\u0440"]);
    assert.deepEqual(await found("target_nested"), ["deep/er/nested.md:2:target_nested here"]);
  });

  it("gives no matches for none, an empty or a missing directory, and caps at maxCount", async () => {
    assert.deepEqual(await found("zzz-no-such-text"), []);
    await sb.execute("mkdir -p /workspace/gr-empty");
    assert.deepEqual(await sb.grep("x", at("gr-empty")), { matches: [] });
    assert.deepEqual(await sb.grep("x", at("gr-missing")), { matches: [] });
    const capped = await sb.grep("apple", at("gr"), null, 2);
    assert.deepEqual([capped.matches.length, capped.truncated], [2, true]);
  });
});

describe("delete and workflows", () => {
  it("deletes files and directories recursively; a missing path is 'not found'", async () => {
    await sb.write(at("del/a/b/c.txt"), "c");
    assert.deepEqual(await sb.delete(at("del/a")), { path: at("del/a"), filesUpdate: null });
    assert.equal(existsSync(join(ws, "del/a")), false);
    assert.match((await sb.delete(at("del/a"))).error, /not found/);
  });

  it("write, read, edit, read again", async () => {
    const p = at("flow/app.py");
    await sb.write(p, "def main():\n    print('v1')\n");
    assert.match((await sb.read(p)).content, /v1/);
    assert.equal((await sb.edit(p, "v1", "v2")).occurrences, 1);
    assert.equal((await sb.read(p)).content, "def main():\n    print('v2')");
    assert.equal((await sb.execute("cd /workspace/flow && python3 -c 'import app; app.main()'")).output, "v2\n");
  });
});

describe("what agentbox adds", () => {
  it("lets deepagents write its offloaded results and history, in the sandbox only", async () => {
    const p = "/large_tool_results/call_1.txt";
    assert.equal((await sb.write(p, "a very large result\nline two")).error, undefined);
    assert.equal((await sb.read(p)).content, "a very large result\nline two");
    assert.deepEqual((await sb.grep("large result", "/large_tool_results")).matches, [{ path: p, line: 1, text: "a very large result" }]);
    assert.deepEqual((await sb.ls("/large_tool_results")).files.map((f) => f.path), [p]);
    assert.equal((await sb.execute(`wc -l ${p}`)).output, `1 ${p}\n`);
    assert.equal((await sb.write("/conversation_history/t1.md", "# history")).error, undefined);
    assert.equal(existsSync(join(ws, "large_tool_results")), false);
    // the rest of the root stays read-only
    assert.match((await sb.write("/elsewhere/x.txt", "x")).error, /read.only/i);
  });

  it("leaves those directories out when asked", async (t) => {
    const { b } = await own(t, { writableDirs: [] });
    assert.match((await b.write("/large_tool_results/x.txt", "x")).error, /read.only/i);
  });

  it("keeps the skills directory read-only", async (t) => {
    const skills = tempTree("agentbox-js-skills-");
    t.after(() => removeTree(skills));
    writeFileSync(join(skills, "SKILL.md"), "---\nname: demo\n---\nuse me\n");
    const { b } = await own(t, { skills });
    assert.equal((await b.read("/skills/SKILL.md")).content, "---\nname: demo\n---\nuse me");
    assert.match((await b.write("/skills/new.md", "x")).error, /read.only/i);
    assert.match((await b.edit("/skills/SKILL.md", "use me", "changed")).error, /read.only/i);
    assert.deepEqual((await b.uploadFiles([["/skills/up.md", enc("x")]]))[0].error, "permission_denied");
    assert.match((await b.delete("/skills/SKILL.md")).error, /read.only/i);
    assert.equal(readFileSync(join(skills, "SKILL.md"), "utf8"), "---\nname: demo\n---\nuse me\n");
  });
});
