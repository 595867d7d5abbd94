// Files larger than one protocol line: in chunks when the server has
// file_chunks, with bounded memory; refused at once, never hanging, when not.
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, existsSync, openSync, readFileSync, writeSync, closeSync } from "node:fs";
import { dirname, join } from "node:path";
import { describe, it } from "node:test";

import { AgentboxSandbox } from "../dist/deepagents.js";
import { FileError, SINGLE_REQUEST_FILE_BYTES } from "../dist/index.js";
import { base, removeTree, sandbox, tempTree } from "./helpers.mjs";

const MiB = 1024 * 1024;
const sha = (bytes) => createHash("sha256").update(bytes).digest("hex");

async function shaOfFile(path) {
  const h = createHash("sha256");
  for await (const part of createReadStream(path)) h.update(part);
  return h.digest("hex");
}

/** A host file of `size` bytes, written a block at a time; returns its sha256. */
function bigFile(path, size) {
  const block = randomBytes(MiB);
  const h = createHash("sha256");
  const fd = openSync(path, "w");
  for (let done = 0; done < size; done += MiB) {
    const part = block.subarray(0, Math.min(MiB, size - done));
    block[0] = done / MiB; // every block differs
    writeSync(fd, part);
    h.update(part);
  }
  closeSync(fd);
  return h.digest("hex");
}

/**
 * The most arrayBuffers (Buffers) this process held while `fn` ran beyond
 * what it held before (an earlier test's garbage, not yet collected).
 */
async function peakBuffers(fn) {
  const base = process.memoryUsage().arrayBuffers;
  let peak = base;
  const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage().arrayBuffers)), 10);
  try {
    return { result: await fn(), peak: () => peak - base };
  } finally {
    clearInterval(timer);
  }
}

describe("large files", () => {
  it("round-trip bytes larger than one request, exactly", async (t) => {
    const { sb, ws } = await sandbox(t);
    const data = randomBytes(3 * SINGLE_REQUEST_FILE_BYTES + 12345); // about 18 MiB
    if (!sb.chunked) {
      // an older server: refused before anything is sent, and the session goes on
      await assert.rejects(sb.upload("big.bin", data), (e) => e instanceof FileError && e.code === "too_large");
      await sb.ping();
      return;
    }
    assert.ok(sb.hello.max_chunk > 0 && sb.hello.max_chunk < data.length);
    const r = await sb.upload("big/data.bin", data);
    assert.deepEqual(r, { path: "/workspace/big/data.bin", size: data.length });
    assert.equal(sha(readFileSync(join(ws, "big/data.bin"))), sha(data));
    assert.equal(sha(await sb.download("big/data.bin")), sha(data));
    // replaced, not appended to
    await sb.upload("big/data.bin", data.subarray(0, 10));
    assert.equal(readFileSync(join(ws, "big/data.bin")).length, 10);
    await assert.rejects(sb.upload("big/data.bin", data, { overwrite: false }), (e) => e.code === "exists");
  });

  it("uploadFile and downloadFile hand the server host paths (host_files)", async (t) => {
    const { sb, ws } = await sandbox(t);
    assert.ok(sb.hostFiles, "a server this client started has host_files");
    const host = tempTree("agentbox-js-hostfiles-");
    t.after(() => removeTree(host));
    const digest = bigFile(join(host, "in.bin"), 48 * MiB);
    assert.deepEqual(await sb.uploadFile("hf/in.bin", join(host, "in.bin")), { path: "/workspace/hf/in.bin", size: 48 * MiB });
    assert.equal(await shaOfFile(join(ws, "hf/in.bin")), digest);
    assert.equal(await sb.downloadFile("hf/in.bin", join(host, "out.bin")), 48 * MiB);
    assert.equal(await shaOfFile(join(host, "out.bin")), digest);
    // the server names the host path's field (the chunks would fail in
    // this process's own open()), and a failed download leaves the file
    await assert.rejects(sb.uploadFile("hf/x", join(host, "none.bin")),
      (e) => e instanceof FileError && e.code === "file_not_found" && /'from'/.test(e.message));
    await assert.rejects(sb.downloadFile("hf/none.bin", join(host, "out.bin")), (e) => e instanceof FileError);
    assert.equal(await shaOfFile(join(host, "out.bin")), digest);
    await assert.rejects(sb.downloadFile("hf/in.bin", join(host, "no/dir/out.bin")),
      (e) => e instanceof FileError && e.code === "file_not_found" && /'to'/.test(e.message));
  });

  it("move a 160 MiB host file each way holding a few chunks at most", async (t) => {
    const { sb, ws } = await sandbox(t);
    if (!sb.chunked) return t.skip("this agentbox has no file_chunks");
    // the chunks, as through `via` (another host: no host_files)
    Object.defineProperty(sb, "hostFiles", { get: () => false });
    const host = tempTree("agentbox-js-large-");
    t.after(() => removeTree(host));
    const size = 160 * MiB;
    const digest = bigFile(join(host, "in.bin"), size);
    const up = await peakBuffers(() => sb.uploadFile("in.bin", join(host, "in.bin")));
    assert.equal(up.result.size, size);
    assert.equal(await shaOfFile(join(ws, "in.bin")), digest);
    const down = await peakBuffers(() => sb.downloadFile("in.bin", join(host, "out.bin")));
    assert.equal(down.result, size);
    assert.equal(await shaOfFile(join(host, "out.bin")), digest);
    t.diagnostic(`peak buffers: upload ${up.peak()}, download ${down.peak()}`);
    // far below the file's size: the file never was in memory whole
    assert.ok(up.peak() < 64 * MiB, `upload held ${up.peak()} bytes of buffers`);
    assert.ok(down.peak() < 96 * MiB, `download held ${down.peak()} bytes of buffers`);
  });

  it("deepagents' uploadFiles and downloadFiles take 10 MiB files", async (t) => {
    const ws = tempTree();
    const b = await AgentboxSandbox.create(base({ workspace: ws }));
    t.after(async () => {
      await b.close();
      removeTree(ws);
    });
    // which files go through a private host file (host_files), and where
    const viaHost = [];
    for (const name of ["uploadFile", "downloadFile"]) {
      const real = b.sandbox[name].bind(b.sandbox);
      b.sandbox[name] = (path, hostPath, options) => {
        viaHost.push([name, path, hostPath]);
        return real(path, hostPath, options);
      };
    }
    const big = randomBytes(10 * MiB);
    const small = new TextEncoder().encode("small");
    const up = await b.uploadFiles([["/workspace/ten.bin", big], ["/workspace/small.txt", small]]);
    if (!b.sandbox.chunked) {
      // refused with an error, at once; the small file still goes
      assert.deepEqual(up.map((r) => r.error), ["invalid_path", null]);
      return;
    }
    assert.deepEqual(up, [{ path: "/workspace/ten.bin", error: null }, { path: "/workspace/small.txt", error: null }]);
    assert.equal(sha(readFileSync(join(ws, "ten.bin"))), sha(big));
    const down = await b.downloadFiles(["/workspace/ten.bin", "/workspace/small.txt"]);
    assert.equal(sha(down[0].content), sha(big));
    assert.deepEqual(down[1].content, small);
    if (b.sandbox.hostFiles) {
      // the large file both ways, the small one in a request; the private
      // directories removed
      assert.deepEqual(viaHost.map(([name, path]) => [name, path]), [["uploadFile", "/workspace/ten.bin"], ["downloadFile", "/workspace/ten.bin"]]);
      for (const [, , hostPath] of viaHost) assert.ok(!existsSync(dirname(hostPath)), hostPath);
    }
  });

  it("deepagents' uploadFiles keeps at most one chunk's worth of small files in flight", async (t) => {
    const ws = tempTree();
    const b = await AgentboxSandbox.create(base({ workspace: ws }));
    t.after(async () => {
      await b.close();
      removeTree(ws);
    });
    const budget = b.sandbox.maxFileBytesPerRequest;
    const upload = b.sandbox.upload.bind(b.sandbox);
    let inFlight = 0;
    let most = 0;
    b.sandbox.upload = async (path, data, options) => {
      inFlight += data.length;
      most = Math.max(most, inFlight);
      try {
        return await upload(path, data, options);
      } finally {
        inFlight -= data.length;
      }
    };
    const files = Array.from({ length: 12 }, (_, i) => [`/workspace/many/${i}.bin`, randomBytes(Math.floor(budget / 3))]);
    const r = await b.uploadFiles(files);
    assert.deepEqual(r.map((x) => x.error), files.map(() => null));
    assert.ok(most <= budget && most >= 2 * Math.floor(budget / 3), `in flight at most ${most} bytes, budget ${budget}`);
    for (const [path, data] of files) assert.equal(sha(readFileSync(join(ws, path.slice("/workspace/".length)))), sha(data));
  });
});
