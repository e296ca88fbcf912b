#!/usr/bin/env node
// A committed launcher, so pnpm can link the bin at install time, before dist/ is built.
import "../dist/cli.js";
