"""Small programs a build runs as children (compiler launchers). They import nothing of
rocmbuild: the build runs them by file path with rocmbuild's interpreter."""
