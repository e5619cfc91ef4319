#!/usr/bin/env bash
# Push a built HTML folder (the book: book/_build/html) to a branch of a git remote, for GitHub
# Pages: one new commit on top of the branch's history holding exactly the folder's files and a
# .nojekyll (so _static/ is served). Usage: tools/publish_pages.sh HTML_DIR REMOTE [BRANCH]
# REMOTE is a remote name of this checkout (origin) or any git URL or path; BRANCH defaults to
# gh-pages, which is created if the remote lacks it. `make publish PAGES_REMOTE=...` calls this.
set -euo pipefail

html=${1:?usage: tools/publish_pages.sh HTML_DIR REMOTE [BRANCH]}
remote=${2:?usage: tools/publish_pages.sh HTML_DIR REMOTE [BRANCH]}
branch=${3:-gh-pages}
if [ ! -f "$html/index.html" ]; then
  echo "error: $html/index.html not found: build the book first (make book)" >&2
  exit 2
fi
html=$(cd "$html" && pwd)
url=$(git remote get-url "$remote" 2>/dev/null || echo "$remote")
case "$url" in /*|http*|ssh:*|git@*|file:*) ;; *) url=$(cd "$url" 2>/dev/null && pwd || echo "$url") ;; esac
source_sha=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git -C "$work" init -q
git -C "$work" remote add origin "$url"
if git -C "$work" ls-remote --exit-code --heads origin "$branch" >/dev/null 2>&1; then
  git -C "$work" fetch -q --depth 1 origin "$branch"
  git -C "$work" checkout -q -b "$branch" FETCH_HEAD
  git -C "$work" rm -rq --ignore-unmatch -- .
else
  git -C "$work" checkout -q --orphan "$branch"
fi
cp -R "$html"/. "$work"/
touch "$work/.nojekyll"
git -C "$work" add -A
ident=()
git config user.name >/dev/null 2>&1 || ident+=(-c user.name="bitlaws publish")
git config user.email >/dev/null 2>&1 || ident+=(-c user.email="publish@localhost")
if git -C "$work" diff --cached --quiet 2>/dev/null && git -C "$work" rev-parse -q --verify HEAD >/dev/null; then
  echo "nothing changed: $branch of $url already holds this book"
  exit 0
fi
git -C "$work" "${ident[@]}" commit -q -m "Publish the book built from $source_sha"
git -C "$work" push -q origin "HEAD:refs/heads/$branch"
echo "published $html to $branch of $url"
