// @genservice/playground is not built yet (issue 14): this module serves no page, and core answers
// `<mount>/playground` with its JSON 404 until it exports `readPlaygroundAsset(path)`.
export {};
