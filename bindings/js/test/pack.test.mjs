// `npm pack` makes a package with its code and its types, and nothing else.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { it } from "node:test";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");

it("packs dist with the types every export names, the README, and no sources or tests", () => {
  const out = execFileSync("npm", ["pack", "--dry-run", "--json", "--ignore-scripts"], { cwd: root, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  const [pack] = JSON.parse(out);
  const files = new Set(pack.files.map((f) => f.path));
  const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));
  assert.equal(pack.name, "agentbox");
  for (const [subpath, target] of Object.entries(manifest.exports)) {
    const targets = typeof target === "string" ? [target] : Object.values(target);
    for (const t of targets) assert.ok(files.has(t.replace(/^\.\//, "")), `${subpath} names ${t}, which is not in the package`);
  }
  for (const f of ["dist/index.d.ts", "dist/deepagents.d.ts", "dist/sandbox.d.ts", "dist/types.d.ts", "README.md", "package.json"]) {
    assert.ok(files.has(f), `${f} is not in the package`);
  }
  assert.deepEqual([...files].filter((f) => /^(src|test|node_modules|scripts)\//.test(f)), []);
  assert.deepEqual(Object.keys(manifest.dependencies ?? {}), [], "the core has no runtime dependency");
});
