module piglatin

go 1.18
