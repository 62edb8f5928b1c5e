package piglatin

func Sentence(sentence string) string {
	panic("Please implement the Sentence function")
}
