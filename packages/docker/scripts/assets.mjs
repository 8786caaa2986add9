#!/usr/bin/env node
// The package's assets/ (gitignored): what `hermes-sandbox image build` needs once installed,
// copied from their one source of truth at the repository root when the package is packed
// (prepack), and removed again after (postpack), so a checkout never builds from a stale copy.
//
//   node scripts/assets.mjs copy    assets/scripts/build-images.sh, assets/images/ (every image's
//                                   directory — python, node, bash, python-data —, the supervisor's
//                                   C sources, Makefile and README; no compiled binary, no tests, no fuzzers)
//   node scripts/assets.mjs clean   removes assets/
//
// The layout under assets/ is the repository's (scripts/ next to images/): build-images.sh finds
// images/ as ../images from itself, in both places (src/ImageBuild.ts looks in both).
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, rmSync } from "node:fs"
import { basename, dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"

const pkg = join(dirname(fileURLToPath(import.meta.url)), "..")
const root = join(pkg, "..", "..")
const assets = join(pkg, "assets")

const copy = () => {
  rmSync(assets, { recursive: true, force: true })
  const script = join(root, "scripts", "build-images.sh")
  const images = join(root, "images")
  if (!existsSync(script) || !existsSync(join(images, "runner", "hermes-run.c"))) {
    throw new Error(`assets: ${script} or ${images} is missing (pack from a checkout of the repository)`)
  }
  mkdirSync(join(assets, "scripts"), { recursive: true })
  cpSync(script, join(assets, "scripts", "build-images.sh"))
  chmodSync(join(assets, "scripts", "build-images.sh"), 0o755)
  cpSync(images, join(assets, "images"), {
    recursive: true,
    // build/ holds the host's compiled supervisor: the script compiles it where the images are built.
    // fuzz/ is the supervisor's fuzzing harness (scripts/fuzz-supervisor.sh), no part of an image.
    filter: (source) => {
      const name = basename(source)
      const at = relative(images, source)
      return at !== join("runner", "build") && at !== join("runner", "fuzz") && !name.endsWith(".test.ts")
    }
  })
  // Every image build-images.sh can build must be buildable from the copy (python-data included).
  for (const dir of readdirSync(images)) {
    if (existsSync(join(images, dir, "Dockerfile")) && !existsSync(join(assets, "images", dir, "Dockerfile"))) {
      throw new Error(`assets: images/${dir}/Dockerfile was not copied into ${assets}`)
    }
  }
}

const clean = () => rmSync(assets, { recursive: true, force: true })

const command = process.argv[2]
if (command === "copy") copy()
else if (command === "clean") clean()
else {
  process.stderr.write("usage: node scripts/assets.mjs copy|clean\n")
  process.exit(2)
}
