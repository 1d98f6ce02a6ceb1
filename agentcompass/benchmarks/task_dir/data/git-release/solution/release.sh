#!/bin/bash
set -e
cd "$1"
git init -q
git add -A
git commit -q -m "initial import"
git tag v1.0.0
